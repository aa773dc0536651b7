import { lastOfTransaction } from '../db/prepared.ts';
import { statement, type Statement } from '../db/statement.ts';

/**
 * Settling a run's funding (src/billing/settle-run.ts, docs/design/money.md): tables `wallets`,
 * `ledger_entries`, `bundles` and `workflow_run_tallies`. Each statement has a variant named
 * `<name>_and_commit`, sent with its transaction's COMMIT on a Postgres server (lastOfTransaction in
 * src/db/prepared.ts; prepared as `<name>_and_commit_c`), for a settlement that ends its transaction.
 */

/** `s`'s text under `name`, marked as the last statement of its transaction. */
function andCommit(name: string, s: Statement): Statement {
  return statement(name, lastOfTransaction(s.text));
}

/**
 * One more completed run of workflow $1 on the tally shard of this database session: sessions run one
 * transaction at a time, so concurrent completions land on different rows instead of queueing on one,
 * and `% 16` bounds the rows per workflow.
 */
export const COUNT_COMPLETED_RUN = statement(
  'count_completed_run',
  `insert into workflow_run_tallies (workflow_id, shard, runs) values ($1::uuid, pg_backend_pid() % 16, 1)
     on conflict (workflow_id, shard) do update set runs = workflow_run_tallies.runs + 1`,
);
export const COUNT_COMPLETED_RUN_AND_COMMIT = andCommit('count_completed_run_and_commit', COUNT_COMPLETED_RUN);

/**
 * COUNT_COMPLETED_RUN as a CTE of a settlement, for workflow `$n` when it is not null. Nothing reads it,
 * so Postgres runs it after the main query: the tally row is locked after the bundle or wallet row.
 */
const countCompletedRunCte = (n: number) => `c as (
       insert into workflow_run_tallies (workflow_id, shard, runs) select $${n}::uuid, pg_backend_pid() % 16, 1 where $${n}::uuid is not null
       on conflict (workflow_id, shard) do update set runs = workflow_run_tallies.runs + 1)`;

/** A bundle run given back (the run was not charged): $1 bundle id, $2 workflow whose completed run is counted, or null. */
export const SETTLE_BUNDLE_RUN = statement(
  'settle_bundle_run',
  `with ${countCompletedRunCte(2)}
     update bundles set runs_left = runs_left + 1 where id = $1::uuid`,
);
export const SETTLE_BUNDLE_RUN_AND_COMMIT = andCommit('settle_bundle_run_and_commit', SETTLE_BUNDLE_RUN);

/**
 * The wallet settlement, one statement: `taken` of the hold is taken first (0 when it was taken at
 * preparation; the whole hold when it is taken at settlement, fenced on the balance covering it), then
 * the hold is released and the charge taken from the resulting balance, never below zero. The ledger
 * reads the same either way (hold, release, charge, unpaid, each with the balance after it); held_usd
 * drops by what was held before. When fenced and the balance does not cover the hold, the statement
 * raises (`wr_refuse`, SQLSTATE WR001) rather than return no rows, so a COMMIT sent with it does not happen.
 *
 * $1 account, $2 run id, $3 hold, $4 charge to take, $5 taken (of the hold, now), $6 fenced,
 * $7 workflow whose completed run is counted, or null.
 */
export const SETTLE_WALLET = statement(
  'settle_wallet',
  `with ${countCompletedRunCte(7)},
     w0 as (select balance_usd from wallets where account_id = $1::uuid and balance_usd >= $5::numeric for update),
     calc as (
       select w0.balance_usd - $5::numeric as held,
              w0.balance_usd - $5::numeric + $3::numeric as released,
              least($4::numeric, w0.balance_usd - $5::numeric + $3::numeric) as paid from w0),
     w as (
       update wallets set balance_usd = calc.released - calc.paid, held_usd = held_usd - ($3::numeric - $5::numeric), updated_at = now()
         from calc where account_id = $1::uuid returning calc.held, calc.released, calc.paid, wallets.balance_usd),
     l as (
       insert into ledger_entries (account_id, run_id, kind, amount_usd, balance_after_usd, note, created_at)
       select $1::uuid, $2::uuid, 'hold', -($5::numeric), w.held, 'hold for run', now() from w where $5::numeric > 0
       union all
       select $1::uuid, $2::uuid, 'release', $3::numeric, w.released, 'hold released at settlement', now() from w where $3::numeric > 0
       union all
       select $1::uuid, $2::uuid, 'charge', -w.paid, w.balance_usd, 'run charge', now() from w where w.paid > 0
       union all
       select $1::uuid, $2::uuid, 'unpaid', $4::numeric - w.paid, w.balance_usd, 'charge not covered by the wallet', now() from w where $4::numeric > w.paid)
     select case when exists (select 1 from w) then 1
                 when $6::boolean then wr_refuse('the wallet balance does not cover the run price') else 0 end as settled`,
);
export const SETTLE_WALLET_AND_COMMIT = andCommit('settle_wallet_and_commit', SETTLE_WALLET);
