import { query } from '../db/statement.ts';
import { ADMIT_QUEUED, admitted, admitValues, EXPIRED_CREDENTIAL_WAITS, EXPIRED_QUEUED, LOCK_ADMISSION, type AdmitFromQueueArgs } from '../sql/admit-queued.ts';
import { fork, type RunsDeps } from './deps.ts';
import { publishTerminal } from './fenced-write.ts';
import { finishRuns, runEnding } from './finish-run.ts';
import { CREDENTIALS_TIMEOUT_REASON, QUEUE_TIMEOUT_REASON } from '../domain/run-status.ts';
import { stateFromRow, type RunState } from './run-state.ts';
import { priorityOfClass } from '../domain/run-flow-control.ts';
import { observeQueueWait } from '../observability/metrics.ts';

/** Admission: queued runs become admitted (phase `starting`) within RUN_CAPACITY, in the line's order. */

export interface AdmitArgs {
  /** Runs that may be in flight at once (RUN_CAPACITY), over every process and engine. */
  capacity: number;
  /** Admit only runs accepted for this engine (`runs.engine`); all when omitted. */
  engine?: string;
  /** Embedded engine: claim the admitted runs' lease in the same statement. */
  lease?: { owner: string; ttlMs: number };
  /**
   * Fail runs that waited past QUEUE_MAX_WAIT_SECONDS in the queue, or past CREDENTIALS_WAIT_SECONDS for
   * credentials, first (default true; a periodic caller may skip it in between).
   */
  expireQueued?: boolean;
}

/**
 * Fails queued runs that waited longer than QUEUE_MAX_WAIT_SECONDS (not charged) and runs that waited
 * for credentials longer than CREDENTIALS_WAIT_SECONDS (charged the steps that ran), then admits queued
 * runs in the queue's order (docs/design/flow-control.md#the-order) while the in-flight count is below `capacity`
 * and each account stays below its `max_concurrent_runs`: admitted runs get phase `starting`. Serialised
 * across processes by a transaction-scoped advisory lock. Returns the admitted run ids.
 */
export async function admitQueuedRuns(deps: RunsDeps, args: AdmitArgs): Promise<string[]> {
  return (await admitQueuedRunsDetailed(deps, args)).admitted;
}

export interface AdmitResult {
  admitted: string[];
  /** The admitted runs' state as admission left it (pending, phase `starting`), in `admitted` order. */
  states: RunState[];
  /** False when the queue is known to hold no other admissible run right now. */
  more: boolean;
  /** Runs this round failed because they waited for credentials past CREDENTIALS_WAIT_SECONDS. */
  expiredWaits?: string[];
}

/**
 * admitQueuedRuns, also telling whether admissible runs may still be waiting (the engine skips idle
 * admissions). The expiries go first in a transaction of their own (one FINISH_RUNS for all of them settles their charges),
 * then the round is one statement (ADMIT_QUEUED), which sees them committed.
 */
export async function admitQueuedRunsDetailed(deps: RunsDeps, args: AdmitArgs): Promise<AdmitResult> {
  const expiredWaits = args.expireQueued === false ? [] : await expireWaitingRuns(deps, args.engine);
  const em = fork(deps);
  const round = admitted(await query(em, ADMIT_QUEUED, admitValues(roundArgs(args))));
  if (round.rows.length === 0) return { admitted: [], states: [], more: round.more, expiredWaits };
  for (const r of round.rows) observeQueueWait(priorityOfClass(Number(r.queued_priority)), r.queued_keyed === true, Number(r.queued_seconds));
  const states = await Promise.all(round.rows.map((r) => stateFromRow(em, String(r.id), r)));
  return { admitted: states.map((st) => st.runId), states, more: round.more, expiredWaits };
}

/**
 * Fails, under the admission lock, the queued runs that waited past QUEUE_MAX_WAIT_SECONDS (not charged)
 * and the runs that waited for credentials past CREDENTIALS_WAIT_SECONDS (charged the steps that ran,
 * nothing for the wait; the round after counts their slots as free). Returns the latter's ids.
 */
async function expireWaitingRuns(deps: RunsDeps, engine: string | undefined): Promise<string[]> {
  const waits: string[] = [];
  const finished = await fork(deps).transactional(async (tx) => {
    await query(tx, LOCK_ADMISSION, []);
    const expired = await query<{ id: string }>(tx, EXPIRED_QUEUED, [deps.config.queueMaxWaitSeconds]);
    const waited = await query<{ id: string }>(tx, EXPIRED_CREDENTIAL_WAITS, [deps.config.credentialsWaitSeconds, engine ?? null]);
    for (const { id } of waited) waits.push(String(id));
    return finishRuns(tx, [
      ...expired.map(({ id }) => runEnding(String(id), { status: 'failed', charge: 'none', reason: QUEUE_TIMEOUT_REASON })),
      ...waits.map((id) => runEnding(id, { status: 'failed', charge: 'compute', reason: CREDENTIALS_TIMEOUT_REASON })),
    ]);
  });
  for (const [id, run] of finished) publishTerminal(deps, id, run);
  return waits.filter((id) => finished.has(id));
}

/** ADMIT_QUEUED's arguments for a round of `args`: it looks at the queue's first 4 × capacity runs (100 at least). */
export function roundArgs(args: AdmitArgs): AdmitFromQueueArgs {
  return { capacity: args.capacity, engine: args.engine, window: Math.max(args.capacity * 4, 100), lease: args.lease };
}
