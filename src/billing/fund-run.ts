import { Batch } from '../db/batch.ts';
import type { Em } from '../db/orm.ts';
import { FUND_RUNS, fundRunsValues } from '../sql/fund-runs.ts';

/**
 * Funding at preparation (docs/design/money.md): an eligible bundle (same account, workflow and version,
 * runs left) pays the run; otherwise the wallet must hold the caller's displayed price. FUND_RUNS takes
 * the funding under the rows' locks, records it on the run and, for a hold, writes the ledger row, so
 * concurrent runs can never overspend and a hold never lacks its history. Called inside the transaction
 * that starts the run (a batch of one there).
 */
export type FundingResult = { ok: true; funding: 'bundle' | 'wallet' } | { ok: false; reason: string };

export const INSUFFICIENT_FUNDS = 'insufficient funds: the wallet balance does not cover the run price';

const FUNDING = new Batch<string>({ statement: FUND_RUNS, values: fundRunsValues, apartKey: (runId) => runId });

export async function fundRun(tx: Em, runId: string): Promise<FundingResult> {
  const [funded] = await FUNDING.run(tx, runId);
  const funding = funded?.funding;
  if (funding === 'bundle' || funding === 'wallet') return { ok: true, funding };
  return { ok: false, reason: INSUFFICIENT_FUNDS };
}
