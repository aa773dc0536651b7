import { statement } from '../db/statement.ts';

/**
 * How long an idempotency record answers for its key (docs/design/rules.md#idempotency). An expired
 * record is as good as absent: the acceptance replaces it (src/sql/accept-run.ts `claim`), and the
 * sweep (src/services/runs/idempotency-sweeper.ts) deletes it.
 */
export const IDEMPOTENCY_RECORD_HOURS = 24;

/**
 * $1 and $2 bound a range of record ids (exclusive), $3 the batch size: deletes up to $3 expired records
 * of that range, lowest ids first; returns how many and the highest id deleted (`last`, null for none),
 * where the next batch of the same range starts.
 *
 * The range is read on the primary key: record ids are time-ordered (timeOrderedUuid, src/domain/ids.ts),
 * so the expired records are at its low end and no index on `expires_at` costs every acceptance an
 * entry. Records locked by an acceptance (one replacing an expired record, or waiting on it) are skipped,
 * not waited for, and `expires_at` is checked on the locked row: a record the acceptance renewed stays.
 */
export const DELETE_EXPIRED_IDEMPOTENCY_RECORDS = statement(
  'delete_expired_idempotency_records',
  `with doomed as (
  select id from idempotency_records
   where id > $1::uuid and id < $2::uuid and expires_at <= now()
   order by id limit $3 for update skip locked),
gone as (delete from idempotency_records r using doomed d where r.id = d.id returning r.id)
select count(*)::int as deleted, max(id::text) as last from gone`,
);
