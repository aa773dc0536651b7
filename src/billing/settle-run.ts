import type { Em } from '../db/orm.ts';
import { toDb, usd } from '../domain/money.ts';
import { query, type Statement } from '../db/statement.ts';
import {
  COUNT_COMPLETED_RUN,
  COUNT_COMPLETED_RUN_AND_COMMIT,
  SETTLE_BUNDLE_RUN,
  SETTLE_BUNDLE_RUN_AND_COMMIT,
  SETTLE_WALLET,
  SETTLE_WALLET_AND_COMMIT,
} from '../sql/settle-run.ts';

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
  /**
   * The run's wallet hold was recorded on the run but not taken (fundRunAtSettlement): it is taken in
   * this statement, fenced on the balance covering it, then released and the charge taken, with the
   * same ledger rows as a hold taken earlier. Throws InsufficientFundsAtSettlement when the balance does
   * not cover the hold (nothing written; the caller rolls back).
   */
  holdAtSettlement?: boolean;
  /**
   * The caller's transaction ends with this settlement: its last statement is sent with the COMMIT
   * (withCommit), so the wallet row is not held across a round trip to this process.
   */
  commit?: boolean;
}

export class InsufficientFundsAtSettlement extends Error {
  constructor() {
    super('the wallet balance does not cover the run price');
    this.name = 'InsufficientFundsAtSettlement';
  }
}

export async function settleRun(tx: Em, run: SettleInput, billedUsd: string | null, opts: SettleOptions = {}): Promise<void> {
  const counter = opts.countCompletedRunOf ?? null;
  const last = (plain: Statement, committing: Statement) => (opts.commit ? committing : plain);
  if (run.funding === 'bundle' && run.bundleId) {
    if (billedUsd === null) await query(tx, last(SETTLE_BUNDLE_RUN, SETTLE_BUNDLE_RUN_AND_COMMIT), [run.bundleId, counter]);
    else if (counter) await query(tx, last(COUNT_COMPLETED_RUN, COUNT_COMPLETED_RUN_AND_COMMIT), [counter]);
    return;
  }
  const hold = usd(run.holdUsd);
  const take = billedUsd === null || run.funding === null ? usd(0) : usd(billedUsd);
  if (hold.isZero() && take.isZero()) {
    if (counter) await query(tx, last(COUNT_COMPLETED_RUN, COUNT_COMPLETED_RUN_AND_COMMIT), [counter]);
    return;
  }
  // The hold is taken here (fenced on the balance) for holdAtSettlement, else it was taken at preparation.
  const taken = opts.holdAtSettlement ? toDb(hold) : toDb(0);
  await refusedAsInsufficientFunds(() =>
    query(tx, last(SETTLE_WALLET, SETTLE_WALLET_AND_COMMIT), [
      run.accountId,
      run.id,
      toDb(hold),
      toDb(take),
      taken,
      opts.holdAtSettlement === true,
      counter,
    ]),
  );
}

/**
 * Runs a statement that takes a wallet hold at settlement (SETTLE_WALLET, START_FINISH_AND_SETTLE),
 * its refusal (the balance does not cover the hold) thrown as InsufficientFundsAtSettlement.
 */
export async function refusedAsInsufficientFunds<T>(settle: () => Promise<T>): Promise<T> {
  try {
    return await settle();
  } catch (error) {
    if ((error as { code?: unknown }).code === REFUSED) throw new InsufficientFundsAtSettlement();
    throw error;
  }
}

/** The SQLSTATE that `wr_refuse` raises (RefuseRoutine in src/db/entities). */
const REFUSED = 'WR001';
