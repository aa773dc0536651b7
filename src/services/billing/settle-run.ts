import type { Em } from '../../db/orm.ts';
import { toDb, usd, minUsd } from '../../domain/money.ts';

/**
 * Settles a run's funding exactly once, inside the transaction that makes the run terminal (the run row
 * is locked and was not terminal, so this cannot run twice). `chargeUsd` null means "not charged":
 * the hold is released in full and a consumed bundle run is given back.
 */
export async function settleRun(
  tx: Em,
  run: { id: string; accountId: string; funding: string | null; bundleId: string | null; holdUsd: string },
  chargeUsd: string | null,
): Promise<string | null> {
  if (run.funding === 'bundle' && run.bundleId) {
    if (chargeUsd === null) {
      await tx.execute('update bundles set runs_left = runs_left + 1 where id = ?', [run.bundleId]);
      return null;
    }
    // A bundle run costs the bundle's price per run, whatever the compute.
    const [b] = await tx.execute<{ usd_per_run: string }[]>('select usd_per_run from bundles where id = ?', [run.bundleId]);
    return toDb(b?.usd_per_run ?? 0);
  }
  const hold = usd(run.holdUsd);
  if (run.funding === 'wallet' && !hold.isZero()) {
    const [w] = await tx.execute<{ balance_usd: string }[]>(
      `update wallets set balance_usd = balance_usd + ?, held_usd = held_usd - ?, updated_at = now()
        where account_id = ? returning balance_usd`,
      [toDb(hold), toDb(hold), run.accountId],
    );
    await ledger(tx, run.accountId, run.id, 'release', toDb(hold), w!.balance_usd, 'hold released at settlement');
  }
  if (chargeUsd === null || run.funding === null) return chargeUsd === null ? null : toDb(chargeUsd);
  const charge = usd(chargeUsd);
  if (charge.isZero()) return toDb(charge);
  const [cur] = await tx.execute<{ balance_usd: string }[]>('select balance_usd from wallets where account_id = ? for update', [run.accountId]);
  const balance = usd(cur?.balance_usd ?? 0);
  const paid = minUsd(charge, balance);
  if (!paid.isZero()) {
    const [w] = await tx.execute<{ balance_usd: string }[]>(
      'update wallets set balance_usd = balance_usd - ?, updated_at = now() where account_id = ? returning balance_usd',
      [toDb(paid), run.accountId],
    );
    await ledger(tx, run.accountId, run.id, 'charge', toDb(paid.negated()), w!.balance_usd, 'run charge');
  }
  const unpaid = charge.minus(paid);
  if (unpaid.greaterThan(0)) {
    // The wallet never goes below zero; what it cannot cover is owed, recorded but not moved.
    await ledger(tx, run.accountId, run.id, 'unpaid', toDb(unpaid), toDb(balance.minus(paid)), 'charge not covered by the wallet');
  }
  return toDb(charge);
}

async function ledger(tx: Em, accountId: string, runId: string, kind: string, amount: string, balanceAfter: string, note: string) {
  await tx.execute(
    `insert into ledger_entries (account_id, run_id, kind, amount_usd, balance_after_usd, note, created_at)
     values (?, ?, ?, ?, ?, ?, now())`,
    [accountId, runId, kind, amount, toDb(balanceAfter), note],
  );
}
