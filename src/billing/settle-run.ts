import type { Em } from '../db/orm.ts';
import { toDb, usd } from '../domain/money.ts';
import { query } from '../db/statement.ts';
import { COUNT_COMPLETED_RUN, SETTLE_BUNDLE_RUN, SETTLE_WALLET } from '../sql/settle-run.ts';

/**
 * Settles a run's funding exactly once, inside the transaction that makes the run terminal (the run row
 * is locked and was not terminal, so this cannot run twice). `billedUsd` is what the terminal statement
 * billed the run (`wr_billed`, src/db/entities/routines.ts); null means "not charged": the hold is
 * released in full and a consumed bundle run is given back.
 *
 * A wallet settles in one statement: the hold is released and the charge taken from the resulting
 * balance, never below zero; the ledger gets the release, the charge, and an `unpaid` row for what the
 * wallet could not cover (recorded, not moved). Callers run it last: it locks the account's wallet row,
 * which every run of the account contends for, so it should be held until commit only.
 */
export interface SettleInput {
  id: string;
  accountId: string;
  funding: string | null;
  bundleId: string | null;
  holdUsd: string;
}

export interface SettleOptions {
  /**
   * A completed run's workflow: its run counter is bumped in the settlement's own statement, so a
   * completed run costs no extra round trip and the counter's row lock is taken after the wallet's.
   */
  countCompletedRunOf?: string;
}

export async function settleRun(tx: Em, run: SettleInput, billedUsd: string | null, opts: SettleOptions = {}): Promise<void> {
  const counter = opts.countCompletedRunOf ?? null;
  if (run.funding === 'bundle' && run.bundleId) {
    if (billedUsd === null) await query(tx, SETTLE_BUNDLE_RUN, [run.bundleId, counter]);
    else if (counter) await query(tx, COUNT_COMPLETED_RUN, [counter]);
    return;
  }
  const hold = usd(run.holdUsd);
  const take = billedUsd === null || run.funding === null ? usd(0) : usd(billedUsd);
  if (hold.isZero() && take.isZero()) {
    if (counter) await query(tx, COUNT_COMPLETED_RUN, [counter]);
    return;
  }
  await query(tx, SETTLE_WALLET, [run.accountId, run.id, toDb(hold), toDb(take), counter]);
}
