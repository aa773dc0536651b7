import type { Em } from '../db/orm.ts';
import type { BatchEntry } from '../domain/run-steps.ts';
import { fundRun, INSUFFICIENT_FUNDS } from '../billing/fund-run.ts';
import { fork, type RunsDeps } from './deps.ts';
import { fencedWriteState, publish, publishTerminal } from './fenced-write.ts';
import type { Written } from './written.ts';
import { finishRuns, runEnding, terminalEventData, type Finish } from './finish-run.ts';
import { batchWrite } from './record-batch.ts';
import { ADMITTED_PHASES, type RunStatus } from '../domain/run-status.ts';
import { stateFromRow, type RunState } from './run-state.ts';
import { query } from '../db/statement.ts';
import { RUN_STATUS } from '../sql/runs.ts';

/** Preparation: an admitted run is funded and started (or fails for insufficient funds). */

export interface PrepareResult {
  status: RunStatus;
  /** True when this call funded and started the run (false on a retry that found it done). */
  started: boolean;
  /** The started run's state (saves a loadRunState), when this call started it. */
  state?: RunState;
}

/**
 * Funds an admitted run and starts it, in one transaction: `run.preparing`, `run.started` (status
 * running), then the funding (bundle, else a wallet hold of the displayed price: the wallet row is locked
 * only for the last statement). When the funding is refused the transaction is rolled back and the run
 * ends `failed` instead, not charged, with `run.preparing` and its terminal event. A run that is not an
 * admitted pending run is left as it is.
 */
export async function prepareRun(deps: RunsDeps, runId: string): Promise<PrepareResult> {
  const em = fork(deps);
  let started: { written: Written; state: RunState } | null = null;
  try {
    started = await em.transactional(async (tx) => {
      const start = await startAdmitted(tx, runId);
      if (!start) return null;
      if (!(await fundRun(tx, runId)).ok) throw new FundingRefused();
      return { written: start.written, state: await stateFromRow(tx, runId, start.row) };
    });
  } catch (error) {
    if (!(error instanceof FundingRefused)) throw error;
    return failUnfunded(deps, runId);
  }
  if (started === null) return { status: await statusOf(deps, runId), started: false };
  publish(deps, runId, started.written);
  return { status: 'running', started: true, state: started.state };
}

class FundingRefused extends Error {}

const UNFUNDED: Finish = { status: 'failed', charge: 'none', reason: INSUFFICIENT_FUNDS };

/** An admitted run its funding refused ends failed, not charged, after its `run.preparing`. */
async function failUnfunded(deps: RunsDeps, runId: string): Promise<PrepareResult> {
  const events = [PREPARING, { type: 'run.failed', data: terminalEventData(UNFUNDED) }];
  const finished = (await finishRuns(fork(deps), [runEnding(runId, UNFUNDED, { admitted: true, events })])).get(runId);
  if (!finished) return { status: await statusOf(deps, runId), started: false };
  publishTerminal(deps, runId, finished);
  return { status: 'failed', started: false };
}

async function statusOf(deps: RunsDeps, runId: string): Promise<RunStatus> {
  const [row] = await query(fork(deps), RUN_STATUS, [runId]);
  if (!row) throw new Error(`run ${runId} does not exist`);
  return row.status as RunStatus;
}

const PREPARING = { type: 'run.preparing', data: { status: 'pending' } };

/**
 * An admitted run becomes running, with `run.preparing` and `run.started`, in one statement; the caller's
 * transaction funds it. Returns the run's state columns, or null when the run is not an admitted pending run.
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
    events: [PREPARING, { type: 'run.started', data: { status: 'running' } }, ...(batch?.events ?? [])],
  });
}
