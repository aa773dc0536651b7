import { statement } from '../db/statement.ts';
import { IdempotencyRecordSchema } from '../db/entities/index.ts';

/**
 * How long an idempotency record answers for its key (docs/design/rules.md#idempotency). An expired
 * record is as good as absent: the acceptance replaces it (src/sql/accept-runs.ts `claim`), and the
 * sweep (src/runs/idempotency-sweeper.ts) deletes it.
 */
export const IDEMPOTENCY_RECORD_HOURS = 24;

/**
 * $1 and $2 bound a range of record ids (exclusive), $3 the batch size: looks at the range's next $3
 * records by id and deletes the expired ones among them. Returns how many it deleted, how many it looked
 * at, and the highest id it looked at (`last`, null for none), where the next batch of the range starts.
 * A batch's work is bounded by what it looks at, not by what it deletes: a range of records that are
 * mostly alive costs a sweep no more than its batches.
 *
 * The range is read on the primary key: record ids are time-ordered (timeOrderedUuid, src/domain/ids.ts),
 * so the expired records are at its low end and no index on `expires_at` costs every acceptance an
 * entry. Records locked by an acceptance (one replacing an expired record, or waiting on it) are skipped,
 * not waited for, and `expires_at` is checked on the locked row: a record the acceptance renewed (with a
 * new id) stays.
 */
export const DELETE_EXPIRED_IDEMPOTENCY_RECORDS = statement(
  'delete_expired_idempotency_records',
  `with look as materialized (
  select id from idempotency_records where id > $1::uuid and id < $2::uuid order by id limit $3),
doomed as (
  select r.id from idempotency_records r
   where r.id in (select id from look) and r.expires_at <= now()
   for update skip locked),
gone as (delete from idempotency_records r using doomed d where r.id = d.id returning r.id)
select (select count(*) from gone)::int as deleted, (select count(*) from look)::int as examined,
       (select max(id::text collate "C") from look) as last`,
  [IdempotencyRecordSchema],
);

/**
 * The ON CONFLICT clause of an acceptance's claim of its idempotency record (src/sql/accept-runs.ts): a
 * record still alive is kept, and returned (a replay, or a 409 on another fingerprint); an expired one is
 * replaced by the new request's.
 */
export const CLAIM_ON_CONFLICT = `on conflict (account_id, key) do update set
    id = case when idempotency_records.expires_at <= now() then excluded.id else idempotency_records.id end,
    fingerprint = case when idempotency_records.expires_at <= now() then excluded.fingerprint else idempotency_records.fingerprint end,
    run_id = case when idempotency_records.expires_at <= now() then excluded.run_id else idempotency_records.run_id end,
    created_at = case when idempotency_records.expires_at <= now() then excluded.created_at else idempotency_records.created_at end,
    expires_at = case when idempotency_records.expires_at <= now() then excluded.expires_at else idempotency_records.expires_at end`;
