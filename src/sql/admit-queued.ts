import { lastOfTransaction } from '../db/prepared.ts';
import { query, statement, type StatementEm } from '../db/statement.ts';
import { AccountSchema, RunSchema } from '../db/entities/index.ts';
import { inFlightRun, queuedRun } from './run-predicates.ts';
import { STATE_COLUMNS } from './runs.ts';

/**
 * Admission rounds run one at a time across processes: each transaction takes this lock first. It also
 * plans the rest of the transaction with plain index scans only (bitmap and sequential scans off): every
 * table the round reads has an index made for its question, and the planner's statistics lag on a young
 * or fast-changing runs table. Every run leaves a dead entry in runs_in_flight_idx when it finishes; a
 * plain index scan marks such entries dead as it passes them, so the next round skips them, while a
 * bitmap scan never does and reads every one of them again each round, until a vacuum.
 */
export const LOCK_ADMISSION = statement(
  'lock_admission',
  `select pg_advisory_xact_lock(727001), set_config('enable_bitmapscan', 'off', true), set_config('enable_seqscan', 'off', true)`,
  [],
);

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
 * One admission round as ONE statement, run under the admission lock (the caller's transaction holds
 * it, taken by an earlier statement, so this statement's snapshot sees every earlier admission): the head
 * of the queue ($3 rows, in the line's order — queue_seq, queued_at, id: src/services/runs/queue-line.ts;
 * only engine $2 when given), the in-flight runs per account
 * and in total, and the admitted runs moved to phase `starting` (with the embedded engine's lease when
 * $4 is given, for $5 seconds). It picks as the loop it replaces did: in queue order, a run of an account
 * is admissible while the account's in-flight runs plus its earlier admissible queued runs stay below
 * `max_concurrent_runs`, and at most $1 − in flight runs are admitted. Returns one row per admitted run
 * (its id and its state columns, STATE_COLUMNS), or one row with a null id when none was; every row carries
 * how many queued runs were looked at and how many were picked.
 *
 * It is the last statement of the admission's transaction: on a Postgres server its COMMIT travels with
 * it (src/db/prepared.ts withCommit), so the admission lock is released without a round trip to this
 * process, and the caller runs nothing else in that transaction.
 */
export const ADMIT_QUEUED = statement('admit_queued', lastOfTransaction(admitText(false)), [RunSchema, AccountSchema]);

/**
 * ADMIT_QUEUED's text; `ifLocked`: ADMIT_QUEUED_IF_LOCKED's. `picked_count` is what was admitted, so
 * `looked_at > picked_count` whenever an admissible run is left waiting.
 */
function admitText(ifLocked: boolean): string {
  const lockedNow = `current_setting('wr.admission', true) = 'true'`;
  return `with inflight as (
  select account_id, count(*)::int as n from runs
   where ${inFlightRun()}
   group by account_id),
q as (
  select id, account_id, queue_seq, queued_at from runs
   where ${queuedRun()} and ($2::text is null or engine = $2::text)${ifLocked ? ` and ${lockedNow}` : ''}
   order by queue_seq, queued_at, id limit $3::int),
ranked as (
  select q.id, q.queue_seq, q.queued_at, a.max_concurrent_runs as max, coalesce(i.n, 0) as used,
         row_number() over (partition by q.account_id order by q.queue_seq, q.queued_at, q.id) as rn
    from q join accounts a on a.id = q.account_id left join inflight i on i.account_id = q.account_id),
picked as (
  select id from ranked where max is null or used + rn <= max
   order by queue_seq, queued_at, id
   limit case when exists (select 1 from q) then greatest($1::int - (select coalesce(sum(n), 0)::int from inflight), 0) else 0 end),${
     ifLocked
       ? `
free as (
  select r.id from runs r join picked on picked.id = r.id
   where ${queuedRun('r')} for update of r skip locked),`
       : ''
   }
u as (
  update runs r set phase = 'starting', updated_at = now(),
         lease_owner = case when $4::text is null then r.lease_owner else $4::text end,
         lease_until = case when $4::text is null then r.lease_until else clock_timestamp() + make_interval(secs => $5::float8) end
    from ${ifLocked ? 'free as picked' : 'picked'} where r.id = picked.id and ${queuedRun('r')}
  returning r.id, ${STATE_COLUMNS.replace(/(\w+)/g, 'r.$1')})
select u.*, (select count(*) from q)::int as looked_at, (select count(*) from u)::int as picked_count${ifLocked ? `, ${lockedNow} as locked` : ''}
  from (select 1) one left join u on true`;
}

export interface AdmitFromQueueArgs {
  capacity: number;
  engine?: string;
  window: number;
  lease?: { owner: string; ttlMs: number };
}

/** ADMIT_QUEUED's values. */
export const admitValues = (a: AdmitFromQueueArgs): unknown[] => [
  a.capacity,
  a.engine ?? null,
  a.window,
  a.lease?.owner ?? null,
  a.lease ? a.lease.ttlMs / 1000 : null,
];

/** The admitted rows (id + state columns) and whether admissible runs may still be waiting. */
export async function admitFromQueue(tx: StatementEm, a: AdmitFromQueueArgs): Promise<{ rows: Record<string, unknown>[]; more: boolean }> {
  return admitted(await query(tx, ADMIT_QUEUED, admitValues(a)));
}

/** ADMIT_QUEUED's rows as the admitted runs and whether admissible runs may still be waiting. */
export function admitted(out: Record<string, unknown>[]): { rows: Record<string, unknown>[]; more: boolean } {
  const first = out[0];
  const lookedAt = Number(first?.looked_at ?? 0);
  const picked = Number(first?.picked_count ?? 0);
  return { rows: out.filter((r) => r.id !== null && r.id !== undefined), more: lookedAt > picked };
}
