import { notFound } from '../domain/errors.ts';
import { isUuid } from '../domain/ids.ts';
import { isTerminal } from '../domain/run-status.ts';
import type { Deps } from '../services/deps.ts';
import { query } from '../db/statement.ts';
import { OVERDUE_RUNS } from '../sql/runs.ts';
import type { EnginePort } from './engine-port.ts';
import { knownRunAccount } from './run-state.ts';
import { fork, type RunsDeps } from './deps.ts';
import { publishTerminal } from './fenced-write.ts';
import { finishRun } from './finish-run.ts';
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

  const { cancelled } = await commitCancellation(deps, runId);
  if (!cancelled) {
    // It became terminal while we asked: report what it is now.
    const now = (await findRun(fork(deps), runId))!;
    return { id: now.id, status: now.status, cancelRequested: false };
  }
  await tellCancelled(deps, deps.engine, runId);
  return { id: runId, status: 'cancelled' as const, cancelRequested: true };
}

/**
 * After a committed cancellation (counted and announced by commitCancellation): this process's engine
 * aborts the run's work, then the others on the database (one of them may be executing the run).
 */
async function tellCancelled(deps: RunsDeps, engine: EnginePort, runId: string): Promise<void> {
  await engine.runCancelled(runId).catch((err) => deps.log.warn({ err, runId, accountId: knownRunAccount(runId) }, 'engine could not abort a cancelled run'));
  deps.bus.publishCancel(runId);
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
  const cancelled: string[] = [];
  for (const { id } of overdue) {
    const runId = String(id);
    if (!(await commitCancellation(deps, runId)).cancelled) continue;
    await tellCancelled(deps, engine, runId);
    cancelled.push(runId);
  }
  return cancelled;
}

/**
 * Commits a run's cancellation (not charged, hold released, terminal event, webhooks) and tells live
 * readers. False when the run was already terminal or does not exist. Called by cancelRun and by the
 * Temporal worker when the workflow itself was cancelled (UI, CLI).
 */
export async function commitCancellation(deps: RunsDeps, runId: string): Promise<{ cancelled: boolean }> {
  const finished = await fork(deps).transactional((tx) => finishRun(tx, runId, { status: 'cancelled', charge: 'none' }));
  publishTerminal(deps, runId, finished);
  return { cancelled: finished !== null };
}
