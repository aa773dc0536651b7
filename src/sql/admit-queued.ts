import { statement } from '../db/statement.ts';
import { AccountSchema, RunSchema } from '../db/entities/index.ts';
import { queuedRun } from '../db/entities/run-predicates.ts';

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
 * says what it admits and how, Migration20261208000000AdmitByPrimaryKey how it writes them): $1 RUN_CAPACITY,
 * $2 the engine or null (any), $3 how many queued runs it looks at, $4 the lease owner or null, $5 the
 * lease's seconds. The function takes the admission lock and then reads the queue in a snapshot of its
 * own, so one statement does what took a lock and a round before. Returns the admitted runs (id and
 * STATE_COLUMNS), or one row with a null id, each with `looked_at` and `picked_count` (see `admitted`).
 */
export const ADMIT_QUEUED = statement('admit_queued', 'select * from wr_admit_queued($1::int, $2::text, $3::int, $4::text, $5::float8)', [
  RunSchema,
  AccountSchema,
]);

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

/** ADMIT_QUEUED's rows as the admitted runs and whether admissible runs may still be waiting. */
export function admitted(out: Record<string, unknown>[]): { rows: Record<string, unknown>[]; more: boolean } {
  const first = out[0];
  const lookedAt = Number(first?.looked_at ?? 0);
  const picked = Number(first?.picked_count ?? 0);
  return { rows: out.filter((r) => r.id !== null && r.id !== undefined), more: lookedAt > picked };
}
