import type { Em } from '../../db/orm.ts';
import { toDb, usd } from '../../domain/money.ts';

/**
 * Funding at preparation (contract §5): an eligible bundle (same account, workflow and version, runs
 * left) pays the run; otherwise the wallet must hold the caller's displayed price. Both are single fenced
 * statements (`runs_left > 0`, `balance_usd >= hold`) that also record the funding on the run and, for
 * a hold, the ledger row, so concurrent runs can never overspend and a hold never lacks its history.
 * Must run inside the caller's transaction, with the run row already locked.
 */
export type FundingResult = { ok: true; funding: 'bundle' | 'wallet'; holdUsd: string } | { ok: false; reason: string };

export const INSUFFICIENT_FUNDS = 'insufficient funds: the wallet balance does not cover the run price';

export async function fundRun(tx: Em, run: { id: string; accountId: string; workflowId: string; versionId: string; displayedPriceUsd: string }): Promise<FundingResult> {
  const [bundle] = await tx.execute<{ id: string }[]>(
    `with b as (
       update bundles set runs_left = runs_left - 1
        where id = (select id from bundles where account_id = ? and workflow_id = ? and version_id = ? and runs_left > 0
                     order by created_at, id limit 1 for update)
        returning id),
     r as (update runs set funding = 'bundle', bundle_id = b.id, hold_usd = 0 from b where runs.id = ?)
     select id from b`,
    [run.accountId, run.workflowId, run.versionId, run.id],
  );
  if (bundle) return { ok: true, funding: 'bundle', holdUsd: '0.000000' };

  const hold = toDb(run.displayedPriceUsd);
  if (usd(hold).isZero()) {
    await tx.execute(`update runs set funding = 'wallet', hold_usd = 0 where id = ?`, [run.id]);
    return { ok: true, funding: 'wallet', holdUsd: hold };
  }
  const [held] = await tx.execute<{ balance_usd: string }[]>(
    `with w as (
       update wallets set balance_usd = balance_usd - ?::numeric, held_usd = held_usd + ?::numeric, updated_at = now()
        where account_id = ? and balance_usd >= ?::numeric returning balance_usd),
     l as (
       insert into ledger_entries (account_id, run_id, kind, amount_usd, balance_after_usd, note, created_at)
       select ?::uuid, ?::uuid, 'hold', -(?::numeric), w.balance_usd, 'hold for run', now() from w),
     r as (update runs set funding = 'wallet', hold_usd = ?::numeric from w where runs.id = ?)
     select balance_usd from w`,
    [hold, hold, run.accountId, hold, run.accountId, run.id, hold, hold, run.id],
  );
  if (!held) return { ok: false, reason: INSUFFICIENT_FUNDS };
  return { ok: true, funding: 'wallet', holdUsd: hold };
}
