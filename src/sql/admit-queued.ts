import { statement } from '../db/statement.ts';
import { AccountSchema, RunSchema } from '../db/entities/index.ts';
import { inFlightRun, queuedRun } from './run-predicates.ts';
import { STATE_COLUMNS } from './runs.ts';

/**
 * The admission lock (advisory lock 727001, until the transaction ends), which wr_admit_queued takes
 * too: the expiry of runs that waited too long takes it first, so that no round admits a run while it is
 * being failed, and it sees every earlier round's admissions.
 */
export const LOCK_ADMISSION = statement('lock_admission', 'select pg_advisory_xact_lock(727001)', []);

/** $1 seconds: queued runs that waited longer than that (QUEUE_MAX_WAIT_SECONDS), oldest first, 500 at most. */
export const EXPIRED_QUEUED = statement(
  'expired_queued',
  `select id from runs where ${queuedRun()}
    and queued_at < clock_timestamp() - make_interval(secs => $1::float8)
  order by queued_at, id limit 500`,
  [RunSchema],
);

/**
 * $1 seconds, $2 engine or null (any): runs suspended for credentials (wait_signal) for longer than that
 * (CREDENTIALS_WAIT_SECONDS; a suspended run's row is not written until it resumes), 500 at most.
 */
export const EXPIRED_CREDENTIAL_WAITS = statement(
  'expired_credential_waits',
  `select id from runs where status = 'suspended' and suspend_reason = 'wait_signal'
    and ($2::text is null or engine = $2)
    and updated_at < clock_timestamp() - make_interval(secs => $1::float8)
  order by updated_at, id limit 500`,
  [RunSchema],
);

/**
 * One admission round as one call of `wr_admit_queued` (src/db/migrations/Migration20261204000000AdmissionFunctions.ts
 * says what it admits and how): $1 RUN_CAPACITY, $2 the engine or null (any), $3 how many queued runs it
 * looks at, $4 the lease owner or null, $5 the lease's seconds. The function takes the admission lock and
 * then reads the queue in a snapshot of its own, so one statement does what took a lock and a round
 * before. Returns the admitted runs (id and STATE_COLUMNS), or one row with a null id, each with
 * `looked_at` and `picked_count` (see `admitted`).
 */
export const ADMIT_QUEUED = statement(
  'admit_queued',
  'select * from wr_admit_queued($1::int, $2::text, $3::int, $4::text, $5::float8)',
  [RunSchema, AccountSchema],
);

export interface AdmitFromQueueArgs {
  capacity: number;
  engine?: string;
  window: number;
  lease?: { owner: string; ttlMs: number };
}

/** ADMIT_QUEUED's values (ADMIT_QUEUED_IF_LOCKED's too). */
export const admitValues = (a: AdmitFromQueueArgs): unknown[] => [
  a.capacity,
  a.engine ?? null,
  a.window,
  a.lease?.owner ?? null,
  a.lease ? a.lease.ttlMs / 1000 : null,
];

/** ADMIT_QUEUED's rows as the admitted runs and whether admissible runs may still be waiting. */
export function admitted(out: Record<string, unknown>[]): { rows: Record<string, unknown>[]; more: boolean } {
  const first = out[0];
  const lookedAt = Number(first?.looked_at ?? 0);
  const picked = Number(first?.picked_count ?? 0);
  return { rows: out.filter((r) => r.id !== null && r.id !== undefined), more: lookedAt > picked };
}

// ---- Admission carried by acceptances (src/engine/embedded/admission-in-acceptance.ts) only. ----

/**
 * The admission lock if it is free, as the first statement of a group of acceptances (src/engine/embedded/
 * admission-in-acceptance.ts): that transaction holds rows others may want while they hold the lock, so it
 * never waits for it. Whether it was taken is kept in the setting `wr.admission` (for ADMIT_QUEUED_IF_LOCKED
 * and the acceptances), with what lets each acceptance admit its own run (`wr.admit_*`, read by
 * src/sql/accept-run.ts): $1 RUN_CAPACITY, $2 the engine, $3 the lease owner or null, $4 the lease's
 * seconds. Taken first, the lock is held by every acceptance's snapshot, so each sees every admission
 * committed before it; admissions elsewhere wait for the group's commit. The planner settings are
 * wr_admit_queued's (the acceptances' own statements are index lookups either way). Returns `locked`:
 * 'true' when the lock was taken.
 */
export const TRY_LOCK_ADMISSION_FOR_ACCEPTANCES = statement(
  'try_lock_admission_for_acceptances',
  `select set_config('wr.admission', pg_try_advisory_xact_lock(727001)::text, true) as locked,
       set_config('wr.admit_capacity', $1::int::text, true), set_config('wr.admit_engine', $2::text, true),
       set_config('wr.admit_lease_owner', coalesce($3::text, ''), true), set_config('wr.admit_lease_secs', coalesce($4::float8, 0)::text, true),
       set_config('enable_bitmapscan', 'off', true), set_config('enable_seqscan', 'off', true)`,
  [],
);

/** Whether TRY_LOCK_ADMISSION_FOR_ACCEPTANCES took the lock. */
const LOCKED_NOW = `current_setting('wr.admission', true) = 'true'`;

/**
 * ADMIT_QUEUED after TRY_LOCK_ADMISSION_FOR_ACCEPTANCES, in a transaction that already holds other rows: it admits
 * nothing unless the lock was taken (`locked` says which), and it skips a picked run whose row another
 * transaction holds instead of waiting for it (a skipped run counts as still waiting).
 */
export const ADMIT_QUEUED_IF_LOCKED = statement(
  'admit_queued_if_locked',
  `with inflight as (
  select account_id, count(*)::int as n from runs
   where ${inFlightRun()}
   group by account_id),
q as (
  select id, account_id, queue_seq, queued_at from runs
   where ${queuedRun()} and ($2::text is null or engine = $2::text) and ${LOCKED_NOW}
   order by queue_seq, queued_at, id limit $3::int),
ranked as (
  select q.id, q.queue_seq, q.queued_at, a.max_concurrent_runs as max, coalesce(i.n, 0) as used,
         row_number() over (partition by q.account_id order by q.queue_seq, q.queued_at, q.id) as rn
    from q join accounts a on a.id = q.account_id left join inflight i on i.account_id = q.account_id),
picked as (
  select id from ranked where max is null or used + rn <= max
   order by queue_seq, queued_at, id
   limit case when exists (select 1 from q) then greatest($1::int - (select coalesce(sum(n), 0)::int from inflight), 0) else 0 end),
free as (
  select r.id from runs r join picked on picked.id = r.id
   where ${queuedRun('r')} for update of r skip locked),
u as (
  update runs r set phase = 'starting', updated_at = now(),
         lease_owner = case when $4::text is null then r.lease_owner else $4::text end,
         lease_until = case when $4::text is null then r.lease_until else clock_timestamp() + make_interval(secs => $5::float8) end
    from free where r.id = free.id and ${queuedRun('r')}
  returning r.id, ${STATE_COLUMNS.replace(/(\w+)/g, 'r.$1')})
select u.*, (select count(*) from q)::int as looked_at, (select count(*) from u)::int as picked_count, ${LOCKED_NOW} as locked
  from (select 1) one left join u on true`,
  [RunSchema, AccountSchema],
);
