import { Migration } from '@mikro-orm/migrations';

/**
 * An admission round and a queue numbering, each one call of a plpgsql function (src/runs/admit-runs.ts,
 * the numbering, dropped by Migration20261209030000DropQueueNumbering). Each takes an advisory lock and then reads what the lock guards:
 * every statement of a VOLATILE plpgsql function takes a fresh snapshot (READ COMMITTED), so the
 * statement after the lock sees everything committed by whoever held the lock before, which a lock taken
 * inside one statement could not (that statement's snapshot predates the wait). Their texts are the
 * routines AdmitQueuedRoutine and (until the numbering went) NumberQueuedRoutine (src/db/entities/queue-routines.ts) declare, so the
 * schema diff finds nothing; a change to either is a new migration the routine then points to.
 */
export class Migration20261204000000AdmissionFunctions extends Migration {
  override name = 'Migration20261204000000AdmissionFunctions';

  override up(): void {
    this.addSql(`create or replace function "wr_admit_queued"(${ADMIT_QUEUED_PARAMS}) returns ${ADMIT_QUEUED_RETURNS}
  volatile language plpgsql as $$ ${ADMIT_QUEUED_BODY} $$`);
    this.addSql(`create or replace function "wr_number_queued"("batch_size" int) returns ${NUMBER_QUEUED_RETURNS}
  volatile language plpgsql as $$ ${NUMBER_QUEUED_BODY} $$`);
  }

  override down(): void {
    this.addSql('drop function if exists wr_admit_queued(int, text, int, text, float8)');
    this.addSql('drop function if exists wr_number_queued(int)');
  }
}

const ADMIT_QUEUED_PARAMS = `"round_capacity" int, "round_engine" text, "queue_window" int, "lease_holder" text, "lease_seconds" float8`;

/** The admitted runs' id and state columns (STATE_COLUMNS, src/sql/runs.ts), and the round's two counts. */
export const ADMIT_QUEUED_RETURNS = `table(id uuid, account_id uuid, version_id uuid, status text, phase text, suspend_reason text,
  resume_at timestamptz, credential_mode text, inputs jsonb, progress jsonb, compute_usd numeric, compute_limit_usd numeric,
  step_usd numeric, steps_executed int, last_sequence int, looked_at int, picked_count int)`;

/**
 * wr_admit_queued(round_capacity, round_engine, queue_window, lease_holder, lease_seconds): one admission
 * round (docs/design/rules.md, "Queue and capacity"). Rounds run one at a time across processes under
 * advisory lock 727001, held until the commit. The round is planned with plain index scans only (bitmap
 * and sequential scans off, for the transaction): every finished run leaves a dead entry in
 * runs_in_flight_idx, which a plain index scan marks dead as it passes so the next round skips it, while a
 * bitmap scan reads them all again each round; and the planner's statistics lag on a fast-changing runs
 * table. With a lease (the embedded engine) the commit does not wait for the disk: a crash that undoes the
 * round puts its runs back in the queue, and the drivers' fenced writes stop at their first write
 * (docs/round-trips.md#commits-that-do-not-wait-for-the-disk).
 *
 * The round looks at the head of the line (queue_window runs of round_engine, or of any engine when null,
 * in the line's order: queue_seq, queued_at, id) and admits in that order while the runs in flight stay
 * within round_capacity and each account's within its max_concurrent_runs: a run of an account is
 * admissible while the account's runs in flight plus its earlier admissible queued runs stay below the
 * limit. Admitted runs get phase `starting` (and the lease of lease_holder for lease_seconds when given).
 * Returns one row per admitted run, or one row with a null id when none was; every row carries how many
 * queued runs were looked at and how many were admitted (looked_at > picked_count: some may still wait).
 * Every column reference is qualified: the returned columns are plpgsql variables of the same names.
 */
export const ADMIT_QUEUED_BODY = `begin
  perform pg_advisory_xact_lock(727001);
  perform set_config('enable_bitmapscan', 'off', true), set_config('enable_seqscan', 'off', true);
  if lease_holder is not null then
    perform set_config('synchronous_commit', 'off', true);
  end if;
  return query
  with in_flight as (
    select busy.account_id, count(*)::int as runs_in_flight from runs busy
     where (busy.status in ('running', 'suspended') or (busy.status = 'pending' and busy.phase in ('starting', 'preparing')))
     group by busy.account_id),
  line_head as (
    select queued.id, queued.account_id, queued.queue_seq, queued.queued_at from runs queued
     where queued.status = 'pending' and queued.phase = 'queued' and (round_engine is null or queued.engine = round_engine)
     order by queued.queue_seq, queued.queued_at, queued.id limit queue_window),
  ranked as (
    select head.id, head.queue_seq, head.queued_at, account.max_concurrent_runs as account_limit,
           coalesce(in_flight.runs_in_flight, 0) as account_in_flight,
           row_number() over (partition by head.account_id order by head.queue_seq, head.queued_at, head.id) as place_in_account
      from line_head head join accounts account on account.id = head.account_id
      left join in_flight on in_flight.account_id = head.account_id),
  picked as (
    select ranked.id from ranked
     where ranked.account_limit is null or ranked.account_in_flight + ranked.place_in_account <= ranked.account_limit
     order by ranked.queue_seq, ranked.queued_at, ranked.id
     limit case when exists (select 1 from line_head)
                then greatest(round_capacity - (select coalesce(sum(in_flight.runs_in_flight), 0)::int from in_flight), 0) else 0 end),
  admitted as (
    update runs run set phase = 'starting', updated_at = now(),
           lease_owner = coalesce(lease_holder, run.lease_owner),
           lease_until = case when lease_holder is null then run.lease_until else clock_timestamp() + make_interval(secs => lease_seconds) end
      from picked where run.id = picked.id and run.status = 'pending' and run.phase = 'queued'
    returning run.id, run.account_id, run.version_id, run.status::text as status, run.phase::text as phase,
              run.suspend_reason::text as suspend_reason, run.resume_at, run.credential_mode::text as credential_mode,
              run.inputs, run.progress, run.compute_usd, run.compute_limit_usd, run.step_usd, run.steps_executed, run.last_sequence)
  select admitted.*, (select count(*) from line_head)::int, (select count(*) from admitted)::int
    from (select 1) as one_row left join admitted on true;
end`;

export const NUMBER_QUEUED_RETURNS = 'table(numbered int)';

/**
 * wr_number_queued(batch_size): numbers up to batch_size unnumbered queued runs, oldest first, after the
 * highest number in use, under the numbering gate (advisory lock 727002)
 * taken exclusively; every acceptance of a queued run holds it shared until its commit. After the lock
 * no acceptance is in flight, and the numbering's fresh snapshot sees every acceptance and every earlier
 * numbering committed: the numbers follow the order readers saw and have no gaps (a snapshot from before
 * the wait would miss a numbering committed meanwhile and hand its numbers out again). A run admitted or
 * cancelled since it was read keeps its number and counts as having left the line. The commit does not
 * wait for the disk: numbers a crash undoes are handed out again by the next numbering. Returns how many
 * runs were numbered.
 */
export const NUMBER_QUEUED_BODY = `begin
  perform pg_advisory_xact_lock(727002);
  perform set_config('synchronous_commit', 'off', true);
  return query
  with last_number as (
    select greatest((select max(queued.queue_seq) from runs queued
                      where queued.status = 'pending' and queued.phase = 'queued' and queued.queue_seq is not null),
                    (select max(departed.queue_seq) from runs departed
                      where departed.queue_seq is not null and (departed.status <> 'pending' or departed.phase <> 'queued')),
                    0) as queue_seq),
  unnumbered as (
    select fresh.id, row_number() over (order by fresh.queued_at, fresh.id) as place
      from (select waiting.id, waiting.queued_at from runs waiting
             where waiting.status = 'pending' and waiting.phase = 'queued' and waiting.queue_seq is null
             order by waiting.queued_at, waiting.id limit batch_size) fresh),
  numbered_runs as (
    update runs run set queue_seq = last_number.queue_seq + unnumbered.place
      from last_number, unnumbered where run.id = unnumbered.id
    returning 1)
  select count(*)::int from numbered_runs;
end`;
