import { statement } from '../db/statement.ts';
import { RunSchema } from '../db/entities/index.ts';
import { scheduledRun } from '../db/entities/run-predicates.ts';
import { fairPass } from './fair-pass.ts';

/**
 * Runs accepted with a later start (phase `scheduled`, `scheduled_for`: docs/design/flow-control.md):
 * moving the due ones into the queue's line, moving a start, and the next start an engine must wake for.
 */

/** Scheduled runs one round moves into the line at most (the rest go in the next round, at once). */
export const ENTER_BATCH = 1000;

/**
 * $1 engine, $2 how many at most: the scheduled runs of `engine` whose start has come enter the line, due
 * first: phase `queued`, `queued_at` the moment they enter, each with its pass in the fair order taken as
 * it enters, as a run accepted at that moment takes it (src/sql/fair-pass.ts). A run locked
 * by a reschedule in flight is skipped (the next round sees it with its new start); the phase test makes
 * a run enter once, whatever number of processes run rounds at once. Returns the ids that entered.
 */
export const ENTER_DUE_RUNS = statement(
  'enter_due_runs',
  `with due as materialized (
  select id, account_id, concurrency_key, priority, scheduled_for from runs
   where ${scheduledRun()} and scheduled_for <= clock_timestamp() and engine = $1
   order by scheduled_for, id limit $2
   for update skip locked),
entering as materialized (
  select n.id, ${fairPass('n')} as fair_pass
    from (select due.*, row_number() over (order by due.scheduled_for, due.id) as ord from due) n)
update runs r set phase = 'queued', queued_at = clock_timestamp(), updated_at = clock_timestamp(), fair_pass = entering.fair_pass
  from entering
 where r.id = entering.id and ${scheduledRun('r')}
returning r.id`,
  [RunSchema],
);

/** $1 engine: the earliest start among its scheduled runs (epoch ms), or null (runs_scheduled_idx). */
export const NEXT_SCHEDULED_START = statement(
  'next_scheduled_start',
  `select (extract(epoch from min(scheduled_for)) * 1000)::float8 as due_ms from runs where ${scheduledRun()} and engine = $1`,
  [RunSchema],
);

/**
 * $1 JSON array of `{id, account_id, start_at}`: each run of that account still scheduled gets its new
 * start (a start already past: now, so the next round moves it), and its Cancel-After deadline moves
 * with it (the deadline counts from the start). A run that entered the line meanwhile is not touched: the
 * row lock and the phase test decide between a reschedule and the round that moves it. Per call: `found`
 * (the account's run exists), `scheduled_for` (the new start, null when the run was not scheduled).
 */
export const RESCHEDULE_RUNS = statement(
  'reschedule_runs',
  `with wanted as materialized (
  select * from jsonb_to_recordset($1::jsonb) as w(ord bigint, id uuid, account_id uuid, start_at timestamptz)),
moved as (
  update runs r set scheduled_for = greatest(w.start_at, clock_timestamp()),
         deadline = r.deadline + (greatest(w.start_at, clock_timestamp()) - r.scheduled_for),
         updated_at = clock_timestamp()
    from wanted w
   where r.id = w.id and r.account_id = w.account_id and ${scheduledRun('r')}
  returning r.id, r.scheduled_for)
select w.ord, exists (select 1 from runs f where f.id = w.id and f.account_id = w.account_id) as found, m.scheduled_for
  from wanted w left join moved m on m.id = w.id
 order by w.ord`,
  [RunSchema],
);
