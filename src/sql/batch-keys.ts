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
