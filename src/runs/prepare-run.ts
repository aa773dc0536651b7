import type { Em } from '../db/orm.ts';
import type { BatchEntry } from '../domain/run-steps.ts';
import { fundRun } from '../billing/fund-run.ts';
import { fork, type RunsDeps } from './deps.ts';
import { fencedWrite, fencedWriteState, publish, publishTerminal } from './fenced-write.ts';
import { together, type Written } from './written.ts';
import { finishedAfter, finishRun, type FinishedRun } from './finish-run.ts';
import { batchWrite } from './record-batch.ts';
import { ADMITTED_PHASES, type RunStatus } from '../domain/run-status.ts';
import { stateFromRow, type RunState } from './run-state.ts';
import { query } from '../db/statement.ts';
import { LOCK_RUN_TO_PREPARE } from '../sql/runs.ts';

/** Preparation: an admitted run is funded and started (or fails for insufficient funds). */

export interface PrepareResult {
  status: RunStatus;
  /** True when this call funded and started the run (false on a retry that found it done). */
  started: boolean;
  /** The started run's state (saves a loadRunState), when this call started it. */
  state?: RunState;
}

/**
 * Funds an admitted run and starts it, in one transaction: `run.preparing`, funding (bundle, else a
 * wallet hold of the displayed price), then `run.started` (status running) or, when funds are
 * insufficient, the terminal `run.failed` (not charged). A run that is not pending is left as it is.
 */
export async function prepareRun(deps: RunsDeps, runId: string): Promise<PrepareResult> {
  const em = fork(deps);
  // Fast path, one transaction: start the run, then fund it (the wallet row is locked only for the
  // last statements). When funding fails the transaction is rolled back and the careful path runs.
  let started: { written: Written; state: RunState } | null = null;
  try {
    started = await em.transactional(async (tx) => {
      const start = await startAdmitted(tx, runId);
      if (!start) return null;
      const funding = await fundRun(tx, fundingArgs(runId, start.row));
      if (!funding.ok) throw new FundingFailed();
      return { written: start.written, state: await stateFromRow(tx, runId, start.row) };
    });
  } catch (error) {
    if (!(error instanceof FundingFailed)) throw error;
  }
  if (started !== null) {
    publish(deps, runId, started.written);
    return { status: 'running', started: true, state: started.state };
  }
  return prepareCarefully(deps, runId);
}

class FundingFailed extends Error {}

/**
 * An admitted run becomes running, with `run.preparing` and `run.started`, in one statement; the caller's
 * transaction funds it. Returns the run's state columns (and what funding needs), or null when the run
 * is not an admitted pending run.
 */
export async function startAdmitted(tx: Em, runId: string, entries: BatchEntry[] = []): Promise<{ row: Record<string, unknown>; written: Written } | null> {
  // A batch rides in the same statement: its results, compute and events after run.started.
  const batch = entries.length ? await batchWrite(tx, runId, entries) : null;
  if (entries.length && !batch) return null;
  return fencedWriteState(tx, runId, {
    ...batch,
    statuses: ['pending'],
    phases: ADMITTED_PHASES,
    move: { to: 'start' },
    events: [{ type: 'run.preparing', data: { status: 'pending' } }, { type: 'run.started', data: { status: 'running' } }, ...(batch?.events ?? [])],
  });
}

export function fundingArgs(runId: string, run: Record<string, unknown>) {
  return {
    id: runId,
    accountId: String(run.account_id),
    workflowId: String(run.workflow_id),
    versionId: String(run.version_id),
    displayedPriceUsd: String(run.displayed_price_usd),
  };
}

/** The general path: run.preparing, funding, then run.started or the terminal run.failed. */
async function prepareCarefully(deps: RunsDeps, runId: string): Promise<PrepareResult> {
  let started: Written | null = null;
  let failed: FinishedRun | null = null;
  const result = await fork(deps).transactional(async (tx): Promise<PrepareResult> => {
    const [run] = await query(tx, LOCK_RUN_TO_PREPARE, [runId]);
    if (!run) throw new Error(`run ${runId} does not exist`);
    if (run.status !== 'pending' || run.phase === 'queued' || run.phase === 'scheduled') return { status: run.status as RunStatus, started: false };
    const preparing = await fencedWrite(tx, runId, {
      statuses: ['pending'],
      move: { to: 'prepare' },
      events: [{ type: 'run.preparing', data: { status: 'pending' } }],
    });
    if (preparing === null) return { status: 'pending', started: false };
    const funding = await fundRun(tx, fundingArgs(runId, run));
    if (!funding.ok) {
      const finished = await finishRun(tx, runId, { status: 'failed', charge: 'none', reason: funding.reason });
      failed = finished && finishedAfter(preparing, finished);
      return { status: 'failed', started: false };
    }
    started = together(
      preparing,
      await fencedWrite(tx, runId, {
        statuses: ['pending'],
        move: { to: 'start' },
        events: [{ type: 'run.started', data: { status: 'running' } }],
      }),
    );
    return { status: 'running', started: true };
  });
  if (result.status === 'failed') publishTerminal(deps, runId, failed);
  else publish(deps, runId, started);
  return result;
}
