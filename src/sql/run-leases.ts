import { statement } from '../db/statement.ts';
import { RunSchema } from '../db/entities/index.ts';
import { TERMINAL_SQL } from '../domain/run-status.ts';
import { admittedRun } from './run-predicates.ts';

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
