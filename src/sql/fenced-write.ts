import { statement } from '../db/statement.ts';
import { RunEventBatchSchema, RunSchema, RunSecretSchema } from '../db/entities/index.ts';
import { EVENTS_TS, runEventsCte } from './run-events.ts';
import { STATE_COLUMNS } from './runs.ts';

/**
 * One fenced update of the run row with its events, as a single statement (src/runs/fenced-write.ts
 * builds the parameters). Nothing is written unless every fence holds:
 *   $1 run id; $2 statuses it must have; $3 nodes that must have no result, $4 delay nodes that must
 *   have no started timer; $5 n or null: n more steps must stay within the compute limit (wr_within_compute_limit);
 *   $6 phases it must have, or null; $7 the suspend reason it must have, or null; $8 a provider
 *   no credential may have been supplied for (run_secrets), or null.
 * What it writes:
 *   $9 the status move or null: `prepare` (phase preparing), `start` (running, started now), `suspend`
 *   (with reason $10 until $11, epoch ms, or null), `resume` (running, no suspension);
 *   $12 results merged into progress, with $13 timers added and $14 removed (null $12: progress kept);
 *   $15 completed steps (compute += $15 × step_usd + $16, steps_executed += $15);
 *   $17–$19 the events (types, node ids, JSON data), after last_sequence, which grows by their count.
 */
const fencedWriteText = (returning: string) => `with written as (
  update runs set
    last_sequence = last_sequence + cardinality($17::text[]),
    updated_at = now(),
    status = case $9::text when 'suspend' then 'suspended' when 'resume' then 'running' when 'start' then 'running' else status end,
    phase = case $9::text when 'start' then null when 'prepare' then 'preparing' else phase end,
    started_at = case when $9::text = 'start' then clock_timestamp() else started_at end,
    suspend_reason = case $9::text when 'suspend' then $10::text when 'resume' then null else suspend_reason end,
    resume_at = case $9::text when 'suspend' then to_timestamp($11::float8 / 1000) when 'resume' then null else resume_at end,
    progress = case when $12::jsonb is null then progress else progress || jsonb_build_object(
      'results', coalesce(progress->'results', '{}'::jsonb) || $12::jsonb,
      'timers', (coalesce(progress->'timers', '{}'::jsonb) || $13::jsonb) - $14::text[]) end,
    compute_usd = compute_usd + $15::int * step_usd + $16::numeric,
    steps_executed = steps_executed + $15::int
  where id = $1::uuid and status = any($2::text[])
    and not jsonb_exists_any(coalesce(progress->'results', '{}'::jsonb), $3::text[])
    and not jsonb_exists_any(coalesce(progress->'timers', '{}'::jsonb), $4::text[])
    and wr_within_compute_limit(compute_usd, $5::int, step_usd, compute_limit_usd)
    and ($6::text[] is null or phase = any($6::text[]))
    and ($7::text is null or suspend_reason = $7::text)
    and ($8::text is null or not exists (select 1 from run_secrets s where s.run_id = runs.id and s.kind = 'provider_credential' and s.name = $8::text))
  returning ${returning}),
${runEventsCte('written', '$17', '$18', '$19')}
select written.*, ${EVENTS_TS} from written`;

/** The fenced write, returning the run's id, new last sequence and its events' `ts` (no row: a fence did not hold). */
export const FENCED_WRITE = statement('fenced_write', fencedWriteText('id, last_sequence'), [RunSchema, RunSecretSchema, RunEventBatchSchema]);

/** The fenced write returning the run's state columns and what funding reads (an admitted run's start). */
export const FENCED_WRITE_STATE = statement(
  'fenced_write_state',
  fencedWriteText(`id, ${STATE_COLUMNS}, workflow_id, displayed_price_usd, creator_price_usd`),
  [RunSchema, RunSecretSchema, RunEventBatchSchema],
);
