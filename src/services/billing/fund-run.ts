import type { Em } from '../../db/orm.ts';
import { toDb, usd } from '../../domain/money.ts';

/**
 * Funding at preparation (contract §5): an eligible bundle (same account, workflow and version, runs
 * left) pays the run; otherwise the wallet must hold the caller's displayed price. Both are single fenced
 * updates (`runs_left > 0`, `balance_usd >= hold`), so concurrent runs can never overspend.
 * Must run inside the caller's transaction, with the run row already locked.
 */
export type FundingResult = { ok: true; funding: 'bundle' | 'wallet'; holdUsd: string } | { ok: false; reason: string };

export async function fundRun(tx: Em, run: { id: string; accountId: string; workflowId: string; versionId: string; displayedPriceUsd: string }): Promise<FundingResult> {
  const [bundle] = await tx.execute<{ id: string }[]>(
    `update bundles set runs_left = runs_left - 1
      where id = (select id from bundles where account_id = ? and workflow_id = ? and version_id = ? and runs_left > 0
                   order by created_at, id limit 1 for update)
      returning id`,
    [run.accountId, run.workflowId, run.versionId],
  );
  if (bundle) {
    await tx.execute(`update runs set funding = 'bundle', bundle_id = ?, hold_usd = 0 where id = ?`, [bundle.id, run.id]);
    return { ok: true, funding: 'bundle', holdUsd: '0.000000' };
  }
  const hold = toDb(run.displayedPriceUsd);
  if (usd(hold).isZero()) {
    await tx.execute(`update runs set funding = 'wallet', hold_usd = 0 where id = ?`, [run.id]);
    return { ok: true, funding: 'wallet', holdUsd: hold };
  }
  const [wallet] = await tx.execute<{ balance_usd: string }[]>(
    `update wallets set balance_usd = balance_usd - ?, held_usd = held_usd + ?, updated_at = now()
      where account_id = ? and balance_usd >= ? returning balance_usd`,
    [hold, hold, run.accountId, hold],
  );
  if (!wallet) return { ok: false, reason: 'insufficient funds: the wallet balance does not cover the run price' };
  await tx.execute(
    `insert into ledger_entries (account_id, run_id, kind, amount_usd, balance_after_usd, note, created_at)
     values (?, ?, 'hold', ?, ?, 'hold for run', now())`,
    [run.accountId, run.id, toDb(usd(hold).negated()), toDb(wallet.balance_usd)],
  );
  await tx.execute(`update runs set funding = 'wallet', hold_usd = ? where id = ?`, [hold, run.id]);
  return { ok: true, funding: 'wallet', holdUsd: hold };
}
