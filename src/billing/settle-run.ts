import type { Em } from '../db/orm.ts';
import { toDb, usd } from '../domain/money.ts';
import { prepared, withCommit } from '../db/prepared.ts';

/**
 * Settles a run's funding exactly once, inside the transaction that makes the run terminal (the run row
 * is locked and was not terminal, so this cannot run twice). `chargeUsd` null means "not charged": the
 * hold is released in full and a consumed bundle run is given back.
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
  /** The bundle's price per run when funded by a bundle. */
  bundleUsdPerRun?: string | null;
  holdUsd: string;
}

/** What the run will be charged: the bundle's price for a bundle run, else the computed charge. */
export function finalCharge(run: SettleInput, chargeUsd: string | null): string | null {
  if (chargeUsd === null) return null;
  if (run.funding === 'bundle' && run.bundleId) return toDb(run.bundleUsdPerRun ?? 0);
  return toDb(chargeUsd);
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

export async function settleRun(tx: Em, run: SettleInput, chargeUsd: string | null, opts: SettleOptions = {}): Promise<string | null> {
  const charge = finalCharge(run, chargeUsd);
  const counter = opts.countCompletedRunOf ?? null;
  const last = (sql: string) => (opts.commit ? withCommit(sql) : sql);
  if (run.funding === 'bundle' && run.bundleId) {
    if (charge === null) await giveBundleRunBack(tx, run.bundleId, counter, last);
    else if (counter) await tx.execute(last(COUNT_RUN), [counter]);
    return charge;
  }
  const hold = usd(run.holdUsd);
  const take = charge === null || run.funding === null ? usd(0) : usd(charge);
  if (hold.isZero() && take.isZero()) {
    if (counter) await tx.execute(last(COUNT_RUN), [counter]);
    return charge;
  }
  const taken = opts.holdAtSettlement ? toDb(hold) : toDb(0);
  try {
    await settleWallet(tx, run, toDb(hold), toDb(take), taken, opts.holdAtSettlement === true, counter, last);
  } catch (error) {
    if ((error as { code?: unknown }).code === REFUSED) throw new InsufficientFundsAtSettlement();
    throw error;
  }
  return charge;
}

/** The SQLSTATE that `wr_refuse` raises (RefuseRoutine in src/db/entities). */
const REFUSED = 'WR001';

/**
 * One more completed run on the tally shard of this database session (workflow_run_tallies): sessions
 * run one transaction at a time, so concurrent completions land on different rows instead of queueing
 * on one, and `% 16` bounds the rows per workflow.
 */
const COUNT_RUN = prepared('count_completed_run', `insert into workflow_run_tallies (workflow_id, shard, runs) values (?, pg_backend_pid() % 16, 1)
     on conflict (workflow_id, shard) do update set runs = workflow_run_tallies.runs + 1`);

/**
 * The counter rides in the settlement statement as a CTE nothing reads, which Postgres runs after the
 * main query: its tally row is locked after the bundle or wallet row.
 */
const counterCte = (workflowId: string | null) => (workflowId ? { sql: `c as (${COUNT_RUN})`, params: [workflowId] } : { sql: '', params: [] });

async function giveBundleRunBack(tx: Em, bundleId: string, countRunOf: string | null, last: (sql: string) => string): Promise<void> {
  const c = counterCte(countRunOf);
  const withCounter = c.sql ? `with ${c.sql} ` : '';
  await tx.execute(last(prepared('settle_bundle_run', `${withCounter}update bundles set runs_left = runs_left + 1 where id = ?`, { variant: true })), [...c.params, bundleId]);
}

/**
 * The wallet settlement, one statement: `taken` of the hold is taken first (0 when it was taken at
 * preparation; the whole hold for holdAtSettlement, fenced on the balance covering it), then the hold is
 * released and the charge taken from the resulting balance, never below zero. The ledger reads the same
 * either way (hold, release, charge, unpaid, each with the balance after it); held_usd drops by what was
 * held before. When `fenced` and the balance does not cover the hold, the statement raises (`wr_refuse`,
 * SQLSTATE WR001) rather than return no rows, so a COMMIT sent with it (withCommit) does not happen.
 */
async function settleWallet(
  tx: Em,
  run: SettleInput,
  hold: string,
  take: string,
  taken: string,
  fenced: boolean,
  countRunOf: string | null,
  last: (sql: string) => string,
): Promise<void> {
  const c = counterCte(countRunOf);
  const withCounter = c.sql ? `${c.sql},\n     ` : '';
  await tx.execute(
    last(
      prepared('settle_wallet', `with ${withCounter}w0 as (select balance_usd from wallets where account_id = ? and balance_usd >= ?::numeric for update),
     calc as (
       select w0.balance_usd - ?::numeric as held,
              w0.balance_usd - ?::numeric + ?::numeric as released,
              least(?::numeric, w0.balance_usd - ?::numeric + ?::numeric) as paid from w0),
     w as (
       update wallets set balance_usd = calc.released - calc.paid, held_usd = held_usd - (?::numeric - ?::numeric), updated_at = now()
         from calc where account_id = ? returning calc.held, calc.released, calc.paid, wallets.balance_usd),
     l as (
       insert into ledger_entries (account_id, run_id, kind, amount_usd, balance_after_usd, note, created_at)
       select ?::uuid, ?::uuid, 'hold', -(?::numeric), w.held, 'hold for run', now() from w where ?::numeric > 0
       union all
       select ?::uuid, ?::uuid, 'release', ?::numeric, w.released, 'hold released at settlement', now() from w where ?::numeric > 0
       union all
       select ?::uuid, ?::uuid, 'charge', -w.paid, w.balance_usd, 'run charge', now() from w where w.paid > 0
       union all
       select ?::uuid, ?::uuid, 'unpaid', ?::numeric - w.paid, w.balance_usd, 'charge not covered by the wallet', now() from w where ?::numeric > w.paid)
     select case when exists (select 1 from w) then 1
                 when ?::boolean then wr_refuse('the wallet balance does not cover the run price') else 0 end as settled`, { variant: true }),
    ),
    [
      ...c.params,
      run.accountId, taken,
      taken,
      taken, hold,
      take, taken, hold,
      hold, taken, run.accountId,
      run.accountId, run.id, taken, taken,
      run.accountId, run.id, hold, hold,
      run.accountId, run.id,
      run.accountId, run.id, take, take,
      fenced,
    ],
  );
}
