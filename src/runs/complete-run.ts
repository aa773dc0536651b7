import type { Em } from '../db/orm.ts';
import type { Finished, FreeAction } from '../domain/graph/interpreter.ts';
import { chargeFor, type StepBatch } from '../domain/run-steps.ts';
import { fundRunAtSettlement } from '../billing/fund-run.ts';
import { InsufficientFundsAtSettlement } from '../billing/settle-run.ts';
import { fork, type RunsDeps } from './deps.ts';
import { publishTerminal } from './fenced-write.ts';
import { applyActionsIn } from './free-actions.ts';
import { finishRun, type Finish, type FinishedRun, type LockedRun } from './finish-run.ts';
import { fundingArgs, startAdmitted } from './prepare-run.ts';
import { recordEntries, writeBatch } from './record-batch.ts';

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
   * Started here: the start and the batch in one statement, then the funding (a bundle pays now, a
   * wallet hold is taken by the settlement, the last statement, so the account's wallet row is locked
   * for one statement and the commit), then the finish, which needs no re-read of the locked run.
   */
  async function startAndFinish(tx: Em): Promise<FinishedRun | null> {
    const run = await startAdmitted(tx, runId, entries ?? []);
    if (!run) throw new NotStartedHere();
    const funding = await fundRunAtSettlement(tx, fundingArgs(runId, run));
    const locked: LockedRun = {
      accountId: String(run.account_id),
      status: 'running',
      funding: funding.funding,
      bundleId: funding.bundleId,
      bundleUsdPerRun: funding.bundleUsdPerRun,
      holdUsd: funding.holdUsd,
      computeUsd: String(run.compute_usd),
      creatorPriceUsd: String(run.creator_price_usd),
      workflowId: String(run.workflow_id),
    };
    return finishRun(tx, runId, finish, { holdAtSettlement: funding.funding === 'wallet', locked, commit: true });
  }
}

/** Rolls back a start-and-complete transaction: the run is left to prepareRun. */
class NotStartedHere extends Error {}
