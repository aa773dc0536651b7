import { statement } from '../db/statement.ts';
import { RunEventBatchSchema, RunSchema, RunSecretSchema } from '../db/entities/index.ts';
import { EVENTS_TS, runEventsCte } from './run-events.ts';
import { STATE_COLUMNS } from './runs.ts';

/**
 * One fenced update of the run row with its events, as a single statement (src/runs/fenced-write.ts
 * builds its one parameter: the call, a JSON object of named fields). Nothing is written unless every
 * fence holds: the run has one of `statuses`; the nodes of `absent_results` have no result and the delay
 * nodes of `absent_timers` no started timer; `limit_steps` (n or null) more steps stay within the compute
 * limit (wr_within_compute_limit); it is in one of `phases` (or null: any); it is suspended for
 * `suspended_for` (or null: any); no credential was supplied for the provider `no_credential_for` (or null).
 * What it writes: the status `move` or null: `prepare` (phase preparing), `start` (running, started now),
 * `suspend` (for `suspend_as` until `resume_ms`, epoch ms, or null), `resume` (running, no suspension);
 * `results` merged into progress, with `add_timers` added and `remove_timers` removed (null `results`:
 * progress kept); `steps` completed (compute += steps × step_usd + `extra`, steps_executed += steps); the
 * events (`types`, `node_ids`, `data`), after last_sequence, which grows by their count.
 */
const fencedWriteText = (returning: string) => `with call as (
  select * from jsonb_to_record($1::jsonb)
         as call(run_id uuid, statuses text[], absent_results text[], absent_timers text[], limit_steps int, phases text[], suspended_for text,
                 no_credential_for text, move text, suspend_as text, resume_ms float8, results jsonb, add_timers jsonb, remove_timers text[],
                 steps int, extra numeric, types text[], node_ids text[], data jsonb[])),
written as (
  update runs set
    last_sequence = runs.last_sequence + cardinality(call.types),
    updated_at = now(),
    status = case call.move when 'suspend' then 'suspended' when 'resume' then 'running' when 'start' then 'running' else runs.status end,
    phase = case call.move when 'start' then null when 'prepare' then 'preparing' else runs.phase end,
    started_at = case when call.move = 'start' then clock_timestamp() else runs.started_at end,
    suspend_reason = case call.move when 'suspend' then call.suspend_as when 'resume' then null else runs.suspend_reason end,
    resume_at = case call.move when 'suspend' then to_timestamp(call.resume_ms / 1000) when 'resume' then null else runs.resume_at end,
    progress = case when call.results is null then runs.progress else runs.progress || jsonb_build_object(
      'results', coalesce(runs.progress->'results', '{}'::jsonb) || call.results,
      'timers', (coalesce(runs.progress->'timers', '{}'::jsonb) || call.add_timers) - call.remove_timers) end,
    compute_usd = runs.compute_usd + call.steps * runs.step_usd + call.extra,
    steps_executed = runs.steps_executed + call.steps
  from call
  where runs.id = call.run_id and runs.status = any(call.statuses)
    and not jsonb_exists_any(coalesce(runs.progress->'results', '{}'::jsonb), call.absent_results)
    and not jsonb_exists_any(coalesce(runs.progress->'timers', '{}'::jsonb), call.absent_timers)
    and wr_within_compute_limit(runs.compute_usd, call.limit_steps, runs.step_usd, runs.compute_limit_usd)
    and (call.phases is null or runs.phase = any(call.phases))
    and (call.suspended_for is null or runs.suspend_reason = call.suspended_for)
    and (call.no_credential_for is null
         or not exists (select 1 from run_secrets s where s.run_id = runs.id and s.kind = 'provider_credential' and s.name = call.no_credential_for))
  returning ${returning}),
${runEventsCte('written', 'call')}
select written.*, ${EVENTS_TS} from written`;

/** The fenced write, returning the run's id, new last sequence and its events' `ts` (no row: a fence did not hold). */
export const FENCED_WRITE = statement('fenced_write', fencedWriteText('runs.id, runs.last_sequence'), [RunSchema, RunSecretSchema, RunEventBatchSchema]);

/** The fenced write returning the run's state columns (an admitted run's start). */
export const FENCED_WRITE_STATE = statement('fenced_write_state', fencedWriteText(`runs.id, ${STATE_COLUMNS.replace(/(\w+)/g, 'runs.$1')}`), [
  RunSchema,
  RunSecretSchema,
  RunEventBatchSchema,
]);
