import { notFound } from '../domain/errors.ts';
import { isUuid } from '../domain/ids.ts';
import { isTerminal } from '../domain/run-status.ts';
import type { Deps } from './deps.ts';
import { query } from '../db/statement.ts';
import { OVERDUE_RUNS } from '../sql/runs.ts';
import type { EnginePort } from './engine-port.ts';
import { knownRunAccount } from './run-state.ts';
import { fork, type RunsDeps } from './deps.ts';
import { announceFinished, finishRuns, runEnding, type Finish } from './finish-run.ts';
import { findAccountRun, findRun } from './run-views.ts';

/**
 * Cancels a run in flight (REST, GraphQL): the transition is committed here (not left to the engine), so
 * the answer is immediate and the same for both engines; the engine is then told to abort in-flight work.
 * Already terminal runs are returned unchanged with cancelRequested false. Every run that is not terminal
 * can be cancelled (its charge is settled in the transaction that ends it), so `cancel_unavailable` is
 * never answered: docs/design/rules.md#error-codes-the-spec-gives-no-status-for.
 */
export async function cancelRun(deps: Deps, accountId: string | null, runId: string) {
  if (!isUuid(runId)) throw notFound('run');
  const em = fork(deps);
  const run = accountId === null ? await findRun(em, runId) : await findAccountRun(em, accountId, runId);
  if (!run) throw notFound('run');
  if (isTerminal(run.status)) return { id: run.id, status: run.status, cancelRequested: false };

  const [cancelled] = await commitCancellations(deps, [runId]);
  if (!cancelled) {
    // It became terminal while we asked: report what it is now.
    const now = (await findRun(fork(deps), runId))!;
    return { id: now.id, status: now.status, cancelRequested: false };
  }
  await tellCancelled(deps, deps.engine, [runId]);
  return { id: runId, status: 'cancelled' as const, cancelRequested: true };
}

/** How many runs' engine work is aborted at once (a Temporal cancel is one call to the server per run). */
const ABORTS_AT_ONCE = 16;

/**
 * After committed cancellations (counted and announced by commitCancellations): this process's engine
 * aborts the runs' work, then the others on the database are told (one of them may be executing a run).
 */
export async function tellCancelled(deps: RunsDeps, engine: EnginePort, runIds: readonly string[]): Promise<void> {
  let next = 0;
  const abortNext = async (): Promise<void> => {
    for (let i = next++; i < runIds.length; i = next++) {
      const runId = runIds[i];
      await engine
        .runCancelled(runId)
        .catch((err) => deps.log.warn({ err, runId, accountId: knownRunAccount(runId) }, 'engine could not abort a cancelled run'));
    }
  };
  await Promise.all(Array.from({ length: Math.min(ABORTS_AT_ONCE, runIds.length) }, abortNext));
  deps.bus.publishCancel(runIds);
}

/** How many overdue runs one round cancels at most (the next round takes the rest). */
const OVERDUE_BATCH = 100;

/**
 * Cancels the runs of `engine` past their Cancel-After deadline exactly as the API's cancel does (not
 * charged, `run.cancelled` event and webhook), whatever their state: queued, running or suspended. Called
 * by the engines' periodic rounds (docs/design/run-metadata.md#deadline); `exceptLeaseOwner` leaves out
 * the runs a Temporal workflow already handles with its own timer. Returns the runs it cancelled.
 */
export async function cancelOverdueRuns(deps: RunsDeps, engine: EnginePort, exceptLeaseOwner: string | null = null): Promise<string[]> {
  const overdue = await query<{ id: string }>(fork(deps), OVERDUE_RUNS, [engine.name, exceptLeaseOwner, OVERDUE_BATCH]);
  const cancelled = await commitCancellations(
    deps,
    overdue.map(({ id }) => String(id)),
  );
  await tellCancelled(deps, engine, cancelled);
  return cancelled;
}

/**
 * Commits the cancellation of the runs of `runIds` still in flight, in one statement (FINISH_RUNS: not
 * charged, hold released or bundle run given back, terminal event, webhooks; in id order, the order its
 * rows are locked in), and tells live readers. Returns the runs it cancelled; one already terminal or
 * missing is left out. A single cancel is a set of one; the Temporal worker calls it when the workflow
 * itself was cancelled (UI, CLI).
 */
export async function commitCancellations(deps: RunsDeps, runIds: readonly string[]): Promise<string[]> {
  const endings = [...new Set(runIds.map((id) => id.toLowerCase()))].sort().map((id) => runEnding(id, CANCELLED));
  const finished = await finishRuns(fork(deps), endings);
  for (const [runId, run] of finished) announceFinished(deps, runId, run);
  return [...finished.keys()];
}

const CANCELLED: Finish = { status: 'cancelled', charge: 'none' };

/** commitCancellations of one run: whether this call cancelled it. */
export async function commitCancellation(deps: RunsDeps, runId: string): Promise<{ cancelled: boolean }> {
  return { cancelled: (await commitCancellations(deps, [runId])).length === 1 };
}
