import { statement } from '../db/statement.ts';
import { BundleSchema, LedgerEntrySchema, RunSchema, WalletSchema } from '../db/entities/index.ts';
import { MONEY_PLAN, MONEY_WRITES } from './run-money.ts';

/**
 * Funds runs at preparation (src/billing/fund-run.ts, docs/design/money.md): ONE statement for any
 * number of them, a single run being a set of one. $1: the calls, a JSON array of `{ord, run_id}`. Run
 * after run in call order (MONEY_PLAN, src/sql/run-money.ts): the bundle of the run's account, workflow
 * and version pays while it has runs left, else the wallet holds the run's displayed price (moved from
 * the balance into `held_usd`, with its `hold` ledger row) when its balance covers it; a price of 0
 * touches no wallet. The funding is recorded on the run. The fences (`runs_left`, the balance) are read
 * under the rows' locks, so concurrent runs never overspend.
 *
 * Answers one row per run found: `ord` and its `funding` (`bundle`, `wallet`, or null: the wallet does
 * not cover the hold, nothing written).
 */
export const FUND_RUNS = statement(
  'fund_runs',
  `with recursive call as (select * from jsonb_to_recordset($1::jsonb) as call(ord bigint, run_id uuid)),
money_call as (
  select call.ord, r.id as run_id, r.account_id, r.workflow_id, r.version_id, true as fund_now, r.displayed_price_usd as price,
         null::text as funded_by, null::uuid as funded_bundle, 0::numeric as held, false as ending, null::numeric as charge
    from call join runs r on r.id = call.run_id
   order by call.ord
     for update of r),
${MONEY_PLAN},
funded_run as (
  update runs set funding = case when moved.bundle_id is null then 'wallet' else 'bundle' end,
                  bundle_id = coalesce(moved.bundle_id, runs.bundle_id), hold_usd = moved.taken
    from money_moved moved where runs.id = moved.run_id),
${MONEY_WRITES}
select placed.ord, case when moved.ord is null then null when moved.bundle_id is null then 'wallet' else 'bundle' end as funding
  from money_placed placed left join money_moved moved on moved.ord = placed.ord`,
  [RunSchema, BundleSchema, WalletSchema, LedgerEntrySchema],
);

/** FUND_RUNS's one parameter for these runs. */
export const fundRunsValues = (runIds: readonly string[]): unknown[] => [JSON.stringify(runIds.map((runId, i) => ({ ord: i + 1, run_id: runId })))];
