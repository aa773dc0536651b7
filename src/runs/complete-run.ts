import type { Em } from '../db/orm.ts';
import type { Finished, FreeAction } from '../domain/graph/interpreter.ts';
import { chargeFor, type NewRunEvent, type StepBatch } from '../domain/run-steps.ts';
import { query } from '../db/statement.ts';
import { START_AND_FINISH } from '../sql/start-and-finish.ts';
import { InsufficientFundsAtSettlement, type SettleInput } from '../billing/settle-run.ts';
import { fork, type RunsDeps } from './deps.ts';
import { eventArrays, publishTerminal } from './fenced-write.ts';
import { applyActionsIn } from './free-actions.ts';
import { finishRun, settleFinished, terminalColumns, terminalEventData, type Finish, type FinishedRun } from './finish-run.ts';
import { batchWrite, recordEntries, writeBatch } from './record-batch.ts';

/** Completion: a run ends as the interpreter decided, with its last writes in the same transaction. */

/**
 * Ends the run as the interpreter decided (finishRun: settlement, terminal event, webhooks, secrets
 * deleted). `actions` are the plan's last free actions, applied in the same transaction, and so is
 * `batch` (in-memory steps not written yet, see recordBatch): one fenced statement for both. Returns
 * false when the run was already terminal; when the batch was refused it is recorded entry by entry
 * instead (recordBatch's fallback) and the run is left for the caller to look at again.
 *
 * `start`: the run is still an admitted pending run that the caller computed entirely in memory, so it
 * is started, its steps recorded, funded and finished in this one transaction (one commit and one
 * wallet lock instead of preparation's and completion's). When it cannot start here (not admitted any
 * more, or funds are insufficient) nothing is written and `completed` is false: prepareRun decides then.
 */
export async function completeRun(
  deps: RunsDeps,
  runId: string,
  finished: Finished,
  actions: FreeAction[] = [],
  batch?: StepBatch,
  opts: { start?: boolean } = {},
): Promise<{ completed: boolean }> {
  const entries = batch?.entries.length || (opts.start && actions.length) ? [...(batch?.entries ?? []), ...(actions.length ? [{ actions }] : [])] : null;
  const finish: Finish = {
    status: finished.status,
    outcome: finished.outcome,
    reason: finished.reason,
    outputs: finished.outputs,
    charge: chargeFor(finished),
  };
  let refused = false;
  let done: FinishedRun | null;
  try {
    done = await fork(deps).transactional((tx) => complete(tx));
  } catch (error) {
    if (error instanceof NotStartedHere || error instanceof InsufficientFundsAtSettlement) return { completed: false };
    throw error;
  }
  if (refused && batch) await recordEntries(deps, runId, batch);
  publishTerminal(deps, runId, done);
  return { completed: done !== null };

  async function complete(tx: Em): Promise<FinishedRun | null> {
    if (opts.start) return startAndFinish(tx);
    if (entries) {
      const written = await writeBatch(tx, runId, entries);
      if (written === null) {
        refused = true;
        return null;
      }
    } else if (actions.length) {
      const applied = await applyActionsIn(tx, runId, actions, true);
      if (applied.last === null) return null;
    }
    return finishRun(tx, runId, finish, { commit: true });
  }

  /**
   * Started here: the start, the batch, the funding mark (a bundle pays now, else the wallet hold is
   * recorded for the settlement to take) and the terminal state in ONE statement (START_AND_FINISH), so
   * the run's row is written once; then the webhook outbox and the settlement, the last statement, sent
   * with the COMMIT, so the account's wallet row is locked for one statement and the commit.
   */
  async function startAndFinish(tx: Em): Promise<FinishedRun | null> {
    const w = entries?.length ? await batchWrite(tx, runId, entries) : null;
    if (entries?.length && !w) throw new NotStartedHere();
    const [row] = await query(tx, START_AND_FINISH, [
      runId,
      w?.absentResults ?? [],
      w?.absentTimers ?? [],
      w?.computeLimitSteps ?? null,
      w?.progress ? JSON.stringify(w.progress.results ?? {}) : null,
      JSON.stringify(w?.progress?.addTimers ?? {}),
      w?.progress?.removeTimers ?? [],
      w?.compute?.steps ?? 0,
      w?.compute?.extra?.toFixed() ?? '0',
      ...eventArrays([...STARTED_EVENTS, ...(w?.events ?? []), { type: `run.${finish.status}`, data: terminalEventData(finish) }]),
      ...terminalColumns(finish),
      finish.charge,
    ]);
    if (!row) throw new NotStartedHere();
    const text = (v: unknown) => (v === null || v === undefined ? null : String(v));
    const settle: SettleInput = {
      id: runId,
      accountId: String(row.account_id),
      funding: String(row.funding),
      bundleId: text(row.bundle_id),
      bundleUsdPerRun: text(row.bundle_usd_per_run),
      holdUsd: String(row.hold_usd),
    };
    return settleFinished(tx, runId, finish, row, settle, text(row.charge), String(row.workflow_id), {
      holdAtSettlement: settle.funding === 'wallet',
      commit: true,
    });
  }
}

const STARTED_EVENTS: NewRunEvent[] = [
  { type: 'run.preparing', data: { status: 'pending' } },
  { type: 'run.started', data: { status: 'running' } },
];

/** Rolls back a start-and-complete transaction: the run is left to prepareRun. */
class NotStartedHere extends Error {}
