import type { Em } from '../db/orm.ts';
import type { Finished, FreeAction } from '../domain/graph/interpreter.ts';
import { chargeFor, type StepBatch } from '../domain/run-steps.ts';
import { fork, type RunsDeps } from './deps.ts';
import { publishTerminal } from './fenced-write.ts';
import { applyActionsIn } from './free-actions.ts';
import { finishedAfter, finishRun, type Finish, type FinishedRun } from './finish-run.ts';
import { recordEntries, writeBatch } from './record-batch.ts';
import { startAndComplete } from './start-and-complete.ts';
import type { Written } from './written.ts';

/** Completion: a run ends as the interpreter decided, with its last writes in the same transaction. */

/**
 * Ends the run as the interpreter decided (finishRun: settlement, terminal event, webhooks, secrets
 * deleted). `actions` are the plan's last free actions, applied in the same transaction, and so is
 * `batch` (in-memory steps not written yet, see recordBatch): one fenced statement for both. Returns
 * false when the run was already terminal; when the batch was refused it is recorded entry by entry
 * instead (recordBatch's fallback) and the run is left for the caller to look at again.
 *
 * `start`: the run is still an admitted pending run that the caller computed entirely in memory, so it
 * is started, its steps recorded, funded and finished in one transaction (startAndComplete). When it
 * cannot start here (not admitted any more, or funds are insufficient) nothing is written and
 * `completed` is false: prepareRun decides then.
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
  if (opts.start) return startAndComplete(deps, runId, finish, entries);
  let refused = false;
  const done = await fork(deps).transactional((tx) => complete(tx));
  if (refused && batch) await recordEntries(deps, runId, batch);
  publishTerminal(deps, runId, done);
  return { completed: done !== null };

  async function complete(tx: Em): Promise<FinishedRun | null> {
    let before: Written | null = null;
    if (entries) {
      before = await writeBatch(tx, runId, entries);
      if (before === null) {
        refused = true;
        return null;
      }
    } else if (actions.length) {
      const applied = await applyActionsIn(tx, runId, actions, true);
      if (!applied.applied) return null;
      before = applied.written;
    }
    const finished = await finishRun(tx, runId, finish);
    return finished && finishedAfter(before, finished);
  }
}
