import { statement } from '../db/statement.ts';
import { RunSchema } from '../db/entities/index.ts';
import { TERMINAL_SQL } from '../domain/run-status.ts';
import { admittedRun, IN_FLIGHT, scheduledRun } from '../db/entities/run-predicates.ts';

/** Run leases (runs.lease_owner / lease_until) of the embedded engine: src/runs/leases.ts. */

/** $1 owner, $2 TTL seconds, $3 engine: every run nobody drives that has something to do now. */
export const CLAIM_UNLEASED_RUNS = statement(
  'claim_unleased_runs',
  `update runs set lease_owner = $1, lease_until = clock_timestamp() + make_interval(secs => $2)
    where id in (
      select id from runs
       where engine = $3
         and (status = 'running'
              or (${admittedRun()})
              or (status = 'suspended' and suspend_reason = 'wait_timer' and resume_at <= clock_timestamp()))
         and (lease_until is null or lease_until < clock_timestamp())
       order by id limit 500
       for update skip locked)
    returning id`,
  [RunSchema],
);

/**
 * $1 TTL seconds, $2 owner, $3 run ids: the runs whose lease $2 still holds, renewed. A run whose row
 * is locked right now (being written: a group of runs committed together locks many run rows, in its
 * own order) is skipped, never waited for, so the renewal cannot deadlock with such a group; it is
 * reported as held when its last committed lease is $2's, and renewed on the next round.
 */
export const RENEW_RUN_LEASES = statement(
  'renew_run_leases',
  `with free as (select id from runs where lease_owner = $2 and id = any($3::uuid[]) for update skip locked),
renewed as (
  update runs r set lease_until = clock_timestamp() + make_interval(secs => $1) from free where r.id = free.id returning r.id)
select id from renewed
union all
select id from runs where lease_owner = $2 and id = any($3::uuid[]) and id not in (select id from free)`,
  [RunSchema],
);

/** $1 owner, $2 TTL seconds, $3 run id: a non-terminal run nobody else holds. */
export const CLAIM_RUN_LEASE = statement(
  'claim_run_lease',
  `update runs set lease_owner = $1, lease_until = clock_timestamp() + make_interval(secs => $2)
    where id = $3 and status not in ${TERMINAL_SQL}
      and (lease_until is null or lease_until < clock_timestamp() or lease_owner = $1)
    returning id`,
  [RunSchema],
);

/** $1 owner, $2 run ids. */
export const RELEASE_RUN_LEASES = statement(
  'release_run_leases',
  `update runs set lease_owner = null, lease_until = null where lease_owner = $1 and id = any($2::uuid[])`,
  [RunSchema],
);

/**
 * $1 engine, $2 owner, $3 CREDENTIALS_WAIT_SECONDS: what the embedded engine's sweep would find, as one
 * read (src/engine/sweep-schedule.ts). `queued`: runs wait in the queue (admission and queue
 * timeouts want the sweep). `due_ms` (epoch ms, null for never): the earliest moment a run in flight
 * needs the sweep — its Cancel-After deadline, a lease held by another owner running out (a crashed
 * process; now when there is none), a wait_timer's due time, a credentials wait running out — or the
 * earliest delayed start of a scheduled run (src/runs/scheduled-runs.ts). Reads the partial indexes of the
 * queue, of the runs in flight and of the scheduled runs only.
 */
export const SWEEP_DUE = statement(
  'sweep_due',
  `select exists (select 1 from runs where status = 'pending' and phase = 'queued' and engine = $1) as queued,
  least((select extract(epoch from min(least(
      deadline,
      case when (status = 'running' or (${admittedRun()})) and lease_owner is distinct from $2
           then coalesce(lease_until, clock_timestamp()) end,
      case when status = 'suspended' and suspend_reason = 'wait_timer' then resume_at end,
      case when status = 'suspended' and suspend_reason = 'wait_signal' then updated_at + make_interval(secs => $3::float8) end
    ))) * 1000
     from runs where (${IN_FLIGHT}) and engine = $1)::float8,
    (select extract(epoch from min(scheduled_for)) * 1000 from runs where ${scheduledRun()} and engine = $1)::float8) as due_ms`,
  [RunSchema],
);
