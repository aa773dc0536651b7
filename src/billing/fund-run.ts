import type { Em } from '../db/orm.ts';
import { toDb } from '../domain/money.ts';
import { prepared } from '../db/prepared.ts';

/**
 * Funding at preparation (docs/design/money.md): an eligible bundle (same account, workflow and version, runs
 * left) pays the run; otherwise the wallet must hold the caller's displayed price. One fenced statement
 * (`runs_left > 0`, `balance_usd >= hold`) takes the funding, records it on the run and, for a hold,
 * writes the ledger row, so concurrent runs can never overspend and a hold never lacks its history.
 * Must run inside the caller's transaction, with the run row already locked.
 */
export type FundingResult = { ok: true; funding: 'bundle' | 'wallet'; holdUsd: string } | { ok: false; reason: string };

export const INSUFFICIENT_FUNDS = 'insufficient funds: the wallet balance does not cover the run price';

/**
 * The CTEs of one statement share a snapshot and see each other only through RETURNING, so the wallet
 * is fenced on the bundle CTE having taken nothing (a bundle run never touches, nor locks, the wallet),
 * a zero hold leaves the wallet alone as a free run always has, and the run row is updated once, from
 * whichever funding `f` holds (a hold leaves bundle_id as it was, as it always has): a row updated twice
 * in one statement keeps only one of the updates.
 * The answer is read from `f`, not from the run update, so a taken bundle or hold is always reported.
 */
/** The oldest eligible bundle with runs left gives one run: `?` account, workflow, version. */
const TAKE_BUNDLE = `b as (
   update bundles set runs_left = runs_left - 1
    where id = (select id from bundles where account_id = ? and workflow_id = ? and version_id = ? and runs_left > 0
                 order by created_at, id limit 1 for update)
    returning id, usd_per_run)`;

const FUND_SQL = prepared('fund_run', `with ${TAKE_BUNDLE},
 w as (
   update wallets set balance_usd = balance_usd - ?::numeric, held_usd = held_usd + ?::numeric, updated_at = now()
    where account_id = ? and balance_usd >= ?::numeric and ?::numeric <> 0 and not exists (select 1 from b)
    returning balance_usd),
 l as (
   insert into ledger_entries (account_id, run_id, kind, amount_usd, balance_after_usd, note, created_at)
   select ?::uuid, ?::uuid, 'hold', -(?::numeric), w.balance_usd, 'hold for run', now() from w),
 f as (
   select 'bundle' as funding, b.id as bundle_id, 0::numeric as hold_usd from b
   union all
   select 'wallet', null::uuid, ?::numeric from w
   union all
   select 'wallet', null::uuid, 0::numeric where ?::numeric = 0 and not exists (select 1 from b)),
 r as (
   update runs set funding = f.funding, bundle_id = coalesce(f.bundle_id, runs.bundle_id), hold_usd = f.hold_usd
     from f where runs.id = ?)
 select funding from f`);

export async function fundRun(tx: Em, run: { id: string; accountId: string; workflowId: string; versionId: string; displayedPriceUsd: string }): Promise<FundingResult> {
  const hold = toDb(run.displayedPriceUsd);
  const [funded] = await tx.execute<{ funding: 'bundle' | 'wallet' }[]>(FUND_SQL, [
    run.accountId, run.workflowId, run.versionId,
    hold, hold, run.accountId, hold, hold,
    run.accountId, run.id, hold,
    hold,
    hold,
    run.id,
  ]);
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
const MARK_FUNDING_SQL = prepared('mark_run_funding', `with ${TAKE_BUNDLE},
 r as (
   update runs set funding = case when b.id is null then 'wallet' else 'bundle' end,
                   bundle_id = coalesce(b.id, runs.bundle_id),
                   hold_usd = case when b.id is null then ?::numeric else 0 end
     from (select 1) one left join b on true
    where runs.id = ?
    returning runs.funding, runs.bundle_id, runs.hold_usd)
 select r.funding, r.bundle_id, r.hold_usd, (select usd_per_run from b) as bundle_usd_per_run from r`);

export async function fundRunAtSettlement(
  tx: Em,
  run: { id: string; accountId: string; workflowId: string; versionId: string; displayedPriceUsd: string },
): Promise<{ funding: 'bundle' | 'wallet'; holdUsd: string; bundleId: string | null; bundleUsdPerRun: string | null }> {
  const hold = toDb(run.displayedPriceUsd);
  const [marked] = await tx.execute<{ funding: 'bundle' | 'wallet'; bundle_id: string | null; bundle_usd_per_run: unknown }[]>(MARK_FUNDING_SQL, [
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
