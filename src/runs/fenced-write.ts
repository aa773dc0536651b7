import type { Em } from '../db/orm.ts';
import { prepared } from '../db/prepared.ts';
import type { NodeResult } from '../domain/graph/types.ts';
import type { Usd } from '../domain/money.ts';
import type { NewRunEvent } from '../domain/run-steps.ts';
import type { RunsDeps } from './deps.ts';
import { announceFinished, type FinishedRun } from './finish-run.ts';
import { RUN_STATUSES, type RunStatus } from '../domain/run-status.ts';

/**
 * Every run operation writes through here: one fenced update of the run row, fenced in SQL on the run's
 * status (and, for node results, on the node having no result yet), so a retry, a late step or a second
 * process never records a result, an event or a charge twice, and nothing changes a terminal run. Event
 * sequences are allocated by bumping `runs.last_sequence` in the same statement that inserts the events
 * (a data-modifying CTE), so they stay gap-free per run. Bus notifications are published only after
 * commit.
 */

export interface FencedWrite {
  /** The run must currently have one of these statuses. */
  statuses: readonly RunStatus[];
  /** These nodes must not have a result yet. */
  absentResults?: string[];
  /** These delay nodes must not have a started timer. */
  absentTimers?: string[];
  /** compute_usd + step_usd must stay within compute_limit_usd (the step may start). */
  withinComputeLimit?: boolean;
  /** Extra `where` conditions with their parameters. */
  where?: { sql: string; params?: unknown[] }[];
  /** Extra `set` fragments with their parameters. */
  set?: { sql: string; params?: unknown[] }[];
  events: NewRunEvent[];
}

/**
 * One fenced update of the run row that allocates the events' sequences (bumping last_sequence) and
 * inserts the events, as a single statement (a data-modifying CTE): atomic without a transaction, and
 * one round trip. Returns the new last sequence, or null when the fence did not hold (nothing written).
 */
export async function fencedWrite(em: Em, runId: string, w: FencedWrite): Promise<number | null> {
  const row = await fencedUpdate(em, runId, w, 'last_sequence');
  return row ? Number(row.last_sequence) : null;
}

/** fencedWrite returning the updated run row's `returning` columns (new values), or null. */
export async function fencedUpdate(em: Em, runId: string, w: FencedWrite, returning: string): Promise<Record<string, unknown> | null> {
  const n = w.events.length;
  const sets = [`last_sequence = last_sequence + ${n}`, 'updated_at = now()'];
  const params: unknown[] = [];
  for (const s of w.set ?? []) {
    sets.push(s.sql);
    params.push(...(s.params ?? []));
  }
  const where = ['id = ?', `status in (${w.statuses.map((s) => `'${s}'`).join(', ')})`];
  params.push(runId);
  if (w.absentResults?.length) {
    where.push(`not jsonb_exists_any(coalesce(progress->'results', '{}'::jsonb), array[?]::text[])`);
    params.push(w.absentResults);
  }
  if (w.absentTimers?.length) {
    where.push(`not jsonb_exists_any(coalesce(progress->'timers', '{}'::jsonb), array[?]::text[])`);
    params.push(w.absentTimers);
  }
  if (w.withinComputeLimit) where.push('compute_usd + step_usd <= compute_limit_usd');
  for (const c of w.where ?? []) {
    where.push(c.sql);
    params.push(...(c.params ?? []));
  }
  const update = `update runs set ${sets.join(', ')} where ${where.join(' and ')} returning ${returning}`;
  if (n === 0) {
    const [row] = await em.execute<Record<string, unknown>[]>(prepared('fenced_update', update, { variant: true }), params);
    return row ?? null;
  }
  params.push(runId); // the `?::uuid` before the values list
  const tuples = w.events.map((e, i) => {
    params.push(e.type, e.nodeId ?? null, JSON.stringify(e.data ?? {}));
    return `(${i + 1}, ?, ?, ?)`;
  });
  const [row] = await em.execute<Record<string, unknown>[]>(
    prepared('fenced_write', `with u as (${update}),
     e as (
       insert into run_events (run_id, sequence, type, node_id, data, ts)
       select v.run_id, u.last_sequence - ${n} + v.ord, v.type, v.node_id, v.data::jsonb, clock_timestamp()
         from u cross join (select t.*, ?::uuid as run_id from (values ${tuples.join(', ')}) as t(ord, type, node_id, data)) v
        order by v.ord)
     select * from u`, { variant: true }),
    params,
  );
  return row ?? null;
}

/** `progress` with results merged in and timers added/removed, as one SQL expression. */
export function progressSet(p: { results?: Record<string, NodeResult>; addTimers?: Record<string, number>; removeTimers?: string[] }) {
  const params: unknown[] = [JSON.stringify(p.results ?? {}), JSON.stringify(p.addTimers ?? {})];
  let timers = `(coalesce(progress->'timers', '{}'::jsonb) || ?::jsonb)`;
  if (p.removeTimers?.length) {
    timers = `(${timers} - array[?]::text[])`;
    params.push(p.removeTimers);
  }
  return {
    sql: `progress = progress || jsonb_build_object('results', coalesce(progress->'results', '{}'::jsonb) || ?::jsonb, 'timers', ${timers})`,
    params,
  };
}

export const timestampFromMs = (ms: number) => ({ sql: 'resume_at = to_timestamp(?::float8 / 1000)', params: [ms] });

export function publish(deps: RunsDeps, runId: string, last: number | null | undefined): void {
  if (typeof last === 'number' && last > 0) deps.bus.publish(runId, last);
}

/** After a committed terminal transition: counted and logged, live readers and (when outbox rows were written) the webhook dispatcher told. */
export function publishTerminal(deps: RunsDeps, runId: string, finished: FinishedRun | null | undefined): void {
  if (finished) announceFinished(deps, runId, finished);
}

/** The result into progress and, for a completed step, one step_usd plus `extra` (LLM usage) into compute. */
export function recordSets(nodeId: string, result: NodeResult, compute: 'step' | { extra: Usd } | null) {
  const sets: { sql: string; params?: unknown[] }[] = [progressSet({ results: { [nodeId]: result } })];
  if (compute === 'step') sets.push({ sql: 'compute_usd = compute_usd + step_usd, steps_executed = steps_executed + 1' });
  else if (compute) {
    sets.push({ sql: 'compute_usd = compute_usd + step_usd + ?::numeric, steps_executed = steps_executed + 1', params: [compute.extra.toFixed()] });
  }
  return sets;
}

/**
 * Appends events to a run's log whatever its status (tests, benchmarks, tools), through the same
 * statement as every other run write. Returns the new last sequence; throws when the run does not exist.
 */
export async function appendRunEvents(em: Em, runId: string, events: NewRunEvent[]): Promise<number> {
  const last = await fencedWrite(em, runId, { statuses: RUN_STATUSES, events });
  if (last === null) throw new Error(`run ${runId} does not exist`);
  return last;
}
