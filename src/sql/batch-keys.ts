import { statement } from '../db/statement.ts';
import { IdempotencyRecordSchema } from '../db/entities/index.ts';

/**
 * $1 account id, $2 the idempotency keys a batch's key gives its items (src/runs/start-batch.ts): the
 * fingerprint of one live record among them that is not $3 (the batch body's), or no row. A row means
 * the batch key was used with another body.
 */
export const FIND_OTHER_BATCH_RECORD = statement(
  'find_other_batch_record',
  `select fingerprint from idempotency_records
    where account_id = $1::uuid and key = any($2::text[]) and expires_at > now() and fingerprint <> $3 limit 1`,
  [IdempotencyRecordSchema],
);

/**
 * $1 account id, $2 the MAC of a batch's key: the key's lock until the transaction ends (two int4 keys,
 * a space apart from the one-key advisory lock of admit-queued.ts), so the
 * acceptances of two bodies under one batch key pass one after another (src/runs/batch-key.ts).
 */
export const LOCK_BATCH_KEY = statement('lock_batch_key', 'select pg_advisory_xact_lock(hashtext($1::text), hashtext($2::text))', []);
