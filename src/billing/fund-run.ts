import type { Em } from '../db/orm.ts';
import { toDb } from '../domain/money.ts';
import { query } from '../db/statement.ts';
import { FUND_RUN } from '../sql/fund-run.ts';

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
