import type { Em } from '../db/orm.ts';
import { toDb } from '../domain/money.ts';
import { query } from '../db/statement.ts';
import { FUND_RUN, MARK_RUN_FUNDING } from '../sql/fund-run.ts';

/**
 * Funding at preparation (docs/design/money.md): an eligible bundle (same account, workflow and version, runs
 * left) pays the run; otherwise the wallet must hold the caller's displayed price. One fenced statement
 * (`runs_left > 0`, `balance_usd >= hold`) takes the funding, records it on the run and, for a hold,
 * writes the ledger row, so concurrent runs can never overspend and a hold never lacks its history.
 * Must run inside the caller's transaction, with the run row already locked.
 */
export type FundingResult = { ok: true; funding: 'bundle' | 'wallet'; holdUsd: string } | { ok: false; reason: string };

export const INSUFFICIENT_FUNDS = 'insufficient funds: the wallet balance does not cover the run price';

export async function fundRun(
  tx: Em,
  run: { id: string; accountId: string; workflowId: string; versionId: string; displayedPriceUsd: string },
): Promise<FundingResult> {
  const hold = toDb(run.displayedPriceUsd);
  const [funded] = await query<{ funding: 'bundle' | 'wallet' }>(tx, FUND_RUN, [run.accountId, run.workflowId, run.versionId, hold, run.id]);
  if (!funded) return { ok: false, reason: INSUFFICIENT_FUNDS };
  if (funded.funding === 'bundle') return { ok: true, funding: 'bundle', holdUsd: '0.000000' };
  return { ok: true, funding: 'wallet', holdUsd: hold };
}

/**
 * For a run that is started, run and settled in one transaction (in-memory steps only): a bundle pays as
 * in fundRun, otherwise the run is marked wallet-funded with its hold, but the wallet is not touched yet:
 * the hold is taken in the settlement's own statement (settleRun's `holdAtSettlement`), so the account's
 * wallet row, which every run of the account contends for, is locked for one statement and the commit.
 * One statement; never fails (insufficient funds show at settlement).
 */
export async function fundRunAtSettlement(
  tx: Em,
  run: { id: string; accountId: string; workflowId: string; versionId: string; displayedPriceUsd: string },
): Promise<{ funding: 'bundle' | 'wallet'; holdUsd: string; bundleId: string | null; bundleUsdPerRun: string | null }> {
  const hold = toDb(run.displayedPriceUsd);
  const [marked] = await query<{ funding: 'bundle' | 'wallet'; bundle_id: string | null; bundle_usd_per_run: unknown }>(tx, MARK_RUN_FUNDING, [
    run.accountId,
    run.workflowId,
    run.versionId,
    hold,
    run.id,
  ]);
  if (!marked) throw new Error(`run ${run.id} does not exist`);
  if (marked.funding === 'bundle') {
    return { funding: 'bundle', holdUsd: '0.000000', bundleId: String(marked.bundle_id), bundleUsdPerRun: toDb(String(marked.bundle_usd_per_run)) };
  }
  // A hold leaves bundle_id as it was (null for a run never funded before).
  return { funding: 'wallet', holdUsd: hold, bundleId: marked.bundle_id === null ? null : String(marked.bundle_id), bundleUsdPerRun: null };
}
