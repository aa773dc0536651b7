import { statement } from '../db/statement.ts';
import { BundleSchema, LedgerEntrySchema, RunSchema, WalletSchema } from '../db/entities/index.ts';

/**
 * Funding a run at preparation (src/billing/fund-run.ts, docs/design/money.md): tables `bundles`,
 * `wallets`, `ledger_entries` and the run's funding columns.
 */

/**
 * The CTE `taken_bundle`: the oldest eligible bundle with runs left (of $1 account, $2 workflow, $3 version) gives
 * one run (returns its id and price per run).
 */
const TAKE_BUNDLE = `taken_bundle as (
   update bundles set runs_left = runs_left - 1
    where id = (select x.id from bundles x
                 where x.account_id = $1::uuid and x.workflow_id = $2::uuid and x.version_id = $3::uuid and x.runs_left > 0
                 order by x.created_at, x.id limit 1 for update of x)
    returning id, usd_per_run)`;

/**
 * A bundle run, else a wallet hold fenced on the balance, recorded on the run, with its ledger row.
 * $1 account, $2 workflow, $3 version (the bundle's keys), $4 the hold (the displayed price), $5 run id.
 *
 * The CTEs of one statement share a snapshot and see each other only through RETURNING, so the wallet
 * is fenced on the bundle CTE having taken nothing (a bundle run never touches, nor locks, the wallet),
 * a zero hold leaves the wallet alone as a free run always has, and the run row is updated once, from
 * whichever funding `chosen_funding` holds (a hold leaves bundle_id as it was, as it always has): a row updated twice
 * in one statement keeps only one of the updates. The answer is read from `chosen_funding`, not from the run
 * update, so a taken bundle or hold is always reported.
 */
export const FUND_RUN = statement(
  'fund_run',
  `with ${TAKE_BUNDLE},
 held_wallet as (
   update wallets set balance_usd = balance_usd - $4::numeric, held_usd = held_usd + $4::numeric, updated_at = now()
    where account_id = $1::uuid and balance_usd >= $4::numeric and $4::numeric <> 0 and not exists (select 1 from taken_bundle)
    returning balance_usd),
 ledger as (
   insert into ledger_entries (account_id, run_id, kind, amount_usd, balance_after_usd, note, created_at)
   select $1::uuid, $5::uuid, 'hold', -($4::numeric), held_wallet.balance_usd, 'hold for run', now() from held_wallet),
 chosen_funding as (
   select 'bundle' as funding, taken_bundle.id as bundle_id, 0::numeric as hold_usd from taken_bundle
   union all
   select 'wallet', null::uuid, $4::numeric from held_wallet
   union all
   select 'wallet', null::uuid, 0::numeric where $4::numeric = 0 and not exists (select 1 from taken_bundle)),
 funded_run as (
   update runs set funding = chosen_funding.funding, bundle_id = coalesce(chosen_funding.bundle_id, runs.bundle_id),
                   hold_usd = chosen_funding.hold_usd
     from chosen_funding where runs.id = $5::uuid)
 select funding from chosen_funding`,
  [BundleSchema, WalletSchema, LedgerEntrySchema, RunSchema],
);
