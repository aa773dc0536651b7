import { fork, type RunsDeps } from './deps.ts';
import { outsideTransaction, query } from '../db/statement.ts';
import { ApiError, invalidRequest, notFound } from '../domain/errors.ts';
import { isUuid } from '../domain/ids.ts';
import { readStartAt } from '../domain/run-start.ts';
import { ENTER_BATCH, ENTER_DUE_RUNS, NEXT_SCHEDULED_START, RESCHEDULE_RUNS } from '../sql/scheduled-runs.ts';
import type { Deps } from './deps.ts';
import { getRun } from './get-run.ts';

/**
 * Delayed starts (docs/design/flow-control.md). A run accepted with a later start waits in phase
 * `scheduled`, outside the queue's line, so no place or ETA counts it; when its start comes an engine
 * round moves it into the line (`enterDueRuns`), from where admission takes it as any queued run. The
 * embedded engine's sweep wakes for the next start (sweep-schedule.ts); the Temporal engine runs it with
 * each admission round, whose workflows start once a run is in the line. Postgres holds the start, so
 * a restart forgets none, and the move is one conditional update, so no run enters twice.
 */

/** Moves the scheduled runs of `engine` whose start has come into the line; returns their ids. */
export async function enterDueRuns(deps: RunsDeps, engine: string): Promise<string[]> {
  const entered: string[] = [];
  for (;;) {
    const rows = await query<{ id: string }>(fork(deps), ENTER_DUE_RUNS, [engine, ENTER_BATCH]);
    entered.push(...rows.map((r) => String(r.id)));
    if (rows.length < ENTER_BATCH) break;
  }
  return entered;
}

/** The earliest start among the scheduled runs of `engine` (epoch ms), or null when none waits. */
export async function nextScheduledStart(deps: RunsDeps, engine: string): Promise<number | null> {
  const [row] = await query<{ due_ms: number | string | null }>(fork(deps), NEXT_SCHEDULED_START, [engine]);
  return row?.due_ms === null || row?.due_ms === undefined ? null : Number(row.due_ms);
}

export const notScheduled = () =>
  new ApiError('not_scheduled', 'the run is not waiting for a scheduled start (it has entered the queue, started or ended); it cannot be rescheduled');

/**
 * POST /runs/{id}/reschedule `{"startAt"}`: a run still waiting for its scheduled start gets a new one
 * (a start already past: it enters the line with the next round); its Cancel-After deadline moves with
 * it. 404 for a run the account cannot see, 409 `not_scheduled` for one that was not accepted with a
 * later start or has entered the line since. Answers the run as GET /runs/{id} shows it.
 */
export async function rescheduleRun(deps: Deps, accountId: string, runId: string, body: unknown) {
  if (!isUuid(runId)) throw notFound('run');
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw invalidRequest('the request body must be a JSON object');
  const { startAt, ...rest } = body as Record<string, unknown>;
  const unknown = Object.keys(rest);
  if (unknown.length) throw invalidRequest(`unknown field "${unknown[0]}": the body is {"startAt": "<RFC 3339 instant>"}`);
  if (startAt === undefined) throw invalidRequest('the body needs "startAt" (an RFC 3339 instant at most 7 days ahead)');
  const at = readStartAt(startAt, Date.now())!;
  const call = { ord: 1, id: runId, account_id: accountId, start_at: new Date(at).toISOString() };
  const [row] = await query<{ found: boolean; scheduled_for: unknown }>(outsideTransaction(deps.orm), RESCHEDULE_RUNS, [JSON.stringify([call])]);
  if (!row?.found) throw notFound('run');
  if (row.scheduled_for === null) throw notScheduled();
  // The engine looks at the new start (the embedded sweep may be waiting for the old one).
  await deps.engine.runAccepted(runId).catch((err) => deps.log.warn({ err, runId, accountId }, 'engine was not told about a rescheduled run'));
  return getRun(deps, accountId, runId);
}
