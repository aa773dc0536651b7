import { outsideTransaction, query, type StatementEm } from '../db/statement.ts';
import { FIND_OTHER_BATCH_RECORD, LOCK_BATCH_KEY } from '../sql/batch-keys.ts';
import type { Principal } from '../domain/principal.ts';
import type { Deps } from './deps.ts';
import { idempotencyConflict } from './accept-run.ts';

/**
 * A batch's Idempotency-Key (docs/design/batch-runs.md#the-batchs-idempotency-key): its items without
 * a key of their own are keyed by it, and the key decides the whole batch: the first body accepted under
 * it is the key's, and any other body is refused whole with 409, however the two requests interleave.
 */

export interface BatchKey {
  key: string;
  /** The fingerprint of the batch's body: every item keyed by the batch's key carries it. */
  fingerprint: string;
}

/**
 * The idempotency key an item without its own gets from its batch's key: the same batch key and index
 * name the same record, so a retried batch answers the runs of the first. A MAC of the key, so that it
 * fits the record's column and no caller's own key can name it.
 */
export function batchItemKey(deps: Deps, batchKey: string, index: number): string {
  return `batch:${deps.sealer.mac(batchKey)}:${index}`;
}

/** 409 when the batch key answered another body: a live record of one of its `n` items carries another fingerprint. */
export async function refuseOtherBody(em: StatementEm, deps: Deps, principal: Principal, batch: BatchKey, n: number): Promise<void> {
  const keys = Array.from({ length: n }, (_, i) => batchItemKey(deps, batch.key, i));
  const [other] = await query(em, FIND_OTHER_BATCH_RECORD, [principal.accountId, keys, batch.fingerprint]);
  if (other) throw idempotencyConflict();
}

/**
 * Runs `accept` (an acceptance of the batch's items) in a transaction holding the batch key's lock,
 * after checking again that no other body holds the key: two bodies raced under one key are accepted
 * one after the other, and the second meets the first's records and is refused whole, so none of its
 * items (not even those past the first body's length) is written.
 */
export async function underBatchKey<T>(deps: Deps, principal: Principal, batch: BatchKey, n: number, accept: (tx: StatementEm) => Promise<T>): Promise<T> {
  return outsideTransaction(deps.orm).transactional(async (tx) => {
    await query(tx, LOCK_BATCH_KEY, [principal.accountId, deps.sealer.mac(batch.key)]);
    await refuseOtherBody(tx, deps, principal, batch, n);
    return accept(tx);
  });
}
