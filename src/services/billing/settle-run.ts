import type { Em } from '../../db/orm.ts';
import { toDb, usd } from '../../domain/money.ts';

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

export async function settleRun(tx: Em, run: SettleInput, chargeUsd: string | null): Promise<string | null> {
  const charge = finalCharge(run, chargeUsd);
  if (run.funding === 'bundle' && run.bundleId) {
    if (charge === null) await tx.execute('update bundles set runs_left = runs_left + 1 where id = ?', [run.bundleId]);
    return charge;
  }
  const hold = usd(run.holdUsd);
  const take = charge === null || run.funding === null ? usd(0) : usd(charge);
  if (hold.isZero() && take.isZero()) return charge;
  await tx.execute(
    `with w0 as (select balance_usd from wallets where account_id = ? for update),
     calc as (
       select w0.balance_usd + ?::numeric as released,
              least(?::numeric, w0.balance_usd + ?::numeric) as paid from w0),
     w as (
       update wallets set balance_usd = calc.released - calc.paid, held_usd = held_usd - ?::numeric, updated_at = now()
         from calc where account_id = ? returning calc.released, calc.paid, wallets.balance_usd)
     insert into ledger_entries (account_id, run_id, kind, amount_usd, balance_after_usd, note, created_at)
     select ?::uuid, ?::uuid, 'release', ?::numeric, w.released, 'hold released at settlement', now() from w where ?::numeric > 0
     union all
     select ?::uuid, ?::uuid, 'charge', -w.paid, w.balance_usd, 'run charge', now() from w where w.paid > 0
     union all
     select ?::uuid, ?::uuid, 'unpaid', ?::numeric - w.paid, w.balance_usd, 'charge not covered by the wallet', now() from w where ?::numeric > w.paid`,
    [
      run.accountId,
      toDb(hold), toDb(take), toDb(hold),
      toDb(hold), run.accountId,
      run.accountId, run.id, toDb(hold), toDb(hold),
      run.accountId, run.id,
      run.accountId, run.id, toDb(take), toDb(take),
    ],
  );
  return charge;
}
