import { lastOfTransaction } from '../db/prepared.ts';
import { statement, type Statement } from '../db/statement.ts';
import { BundleSchema, LedgerEntrySchema, WalletSchema, WorkflowRunTallySchema } from '../db/entities/index.ts';

/**
 * Settling a run's funding (src/billing/settle-run.ts, docs/design/money.md): tables `wallets`,
 * `ledger_entries`, `bundles` and `workflow_run_tallies`. Each statement has a variant named
 * `<name>_and_commit`, sent with its transaction's COMMIT on a Postgres server (lastOfTransaction in
 * src/db/prepared.ts; prepared as `<name>_and_commit_c`), for a settlement that ends its transaction.
 */

/** `s`'s text under `name`, marked as the last statement of its transaction. */
function andCommit(name: string, s: Statement): Statement {
  return statement(name, lastOfTransaction(s.text), s.entities);
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
  [WorkflowRunTallySchema],
);
export const COUNT_COMPLETED_RUN_AND_COMMIT = andCommit('count_completed_run_and_commit', COUNT_COMPLETED_RUN);

/**
 * COUNT_COMPLETED_RUN as the CTE `t` of a settlement: one more completed run of `workflow` (an SQL
 * expression) for each row of `from` (a CTE or table, optional) where `where` holds, when `workflow` is
 * not null. Nothing reads it, so Postgres runs it after the main query: the tally row is locked after the
 * bundle or wallet row. Shared with START_FINISH_AND_SETTLE (src/sql/start-and-finish.ts).
 */
export const countCompletedRunCte = (a: { workflow: string; from?: string; where?: string }) => `t as (
       insert into workflow_run_tallies (workflow_id, shard, runs)
       select ${a.workflow}, pg_backend_pid() % 16, 1${a.from ? ` from ${a.from}` : ''} where ${a.workflow} is not null${a.where ? ` and ${a.where}` : ''}
       on conflict (workflow_id, shard) do update set runs = workflow_run_tallies.runs + 1)`;

/** A bundle run given back (the run was not charged): $1 bundle id, $2 workflow whose completed run is counted, or null. */
export const SETTLE_BUNDLE_RUN = statement(
  'settle_bundle_run',
  `with ${countCompletedRunCte({ workflow: '$2::uuid' })}
     update bundles set runs_left = runs_left + 1 where id = $1::uuid`,
  [WorkflowRunTallySchema, BundleSchema],
);
export const SETTLE_BUNDLE_RUN_AND_COMMIT = andCommit('settle_bundle_run_and_commit', SETTLE_BUNDLE_RUN);

/**
 * The wallet settlement as CTEs (`w0`, `calc`, `w`, `l`), shared by SETTLE_WALLET and
 * START_FINISH_AND_SETTLE (src/sql/start-and-finish.ts): `taken` of the hold is taken first (0 when it
 * was taken at preparation; the whole hold when it is taken at settlement, fenced on the balance
 * covering it), then the hold is released and the charge taken from the resulting balance, never below
 * zero. The ledger reads the same either way (hold, release, charge, unpaid, each with the balance after
 * it: ledgerRows); held_usd drops by what was held before. `w` returns a row when the wallet was settled.
 *
 * SQL expressions: `account`, `run`, `hold`, `take` (the charge to take), `taken`; `from` (optional)
 * joins a CTE the amounts are read from, and `where` gates the settlement on it.
 */
export const settleWalletCtes = (a: { account: string; run: string; hold: string; take: string; taken: string; from?: string; where?: string }) => `w0 as (
       select wallets.account_id, ${a.run} as run_id, wallets.balance_usd, ${a.hold} as hold, ${a.take} as take, ${a.taken} as taken
         from wallets${a.from ? `, ${a.from}` : ''}
        where wallets.account_id = ${a.account} and wallets.balance_usd >= ${a.taken}${a.where ? ` and ${a.where}` : ''}
          for update of wallets),
     calc as (
       select w0.account_id, w0.run_id, w0.hold, w0.take, w0.taken, w0.balance_usd,
              w0.balance_usd - w0.taken + w0.hold - least(w0.take, w0.balance_usd - w0.taken + w0.hold) as settled from w0),
     w as (
       update wallets set balance_usd = calc.settled, held_usd = wallets.held_usd - (calc.hold - calc.taken), updated_at = now()
         from calc where wallets.account_id = calc.account_id
         returning calc.account_id, calc.run_id, calc.hold, calc.take, calc.taken, calc.balance_usd as opening),
     l as (
       insert into ledger_entries (account_id, run_id, kind, amount_usd, balance_after_usd, note, created_at)
       select w.account_id, w.run_id, k.kind, k.amount, k.after, k.note, now()
         from w ${ledgerRows({ balance: 'w.opening', taken: 'w.taken', hold: 'w.hold', take: 'w.take' })}
        where k.written order by k.n)`;

/**
 * The ledger rows of one run's wallet settlement, the one place they are written (settleWalletCtes and
 * START_FINISH_AND_SETTLE_MANY, src/sql/start-finish-and-settle-many.ts): joined LATERAL as
 * `k(n, kind, amount, after, note, written)`, to insert in the order `n` where `written`. From the
 * wallet's `balance` before the run, `taken` of the hold now, the `hold` released and the charge to
 * `take` (SQL expressions): hold, release, charge (what the balance covers) and unpaid (the rest,
 * recorded, not moved), each with the balance after it.
 */
export const ledgerRows = (a: { balance: string; taken: string; hold: string; take: string }) => `
         cross join lateral (select ${a.balance} - ${a.taken} + ${a.hold} as released,
                                    least(${a.take}, ${a.balance} - ${a.taken} + ${a.hold}) as paid) m
         cross join lateral (values (1, 'hold', -${a.taken}, ${a.balance} - ${a.taken}, 'hold for run', ${a.taken} > 0),
                                    (2, 'release', ${a.hold}, m.released, 'hold released at settlement', ${a.hold} > 0),
                                    (3, 'charge', -m.paid, m.released - m.paid, 'run charge', m.paid > 0),
                                    (4, 'unpaid', ${a.take} - m.paid, m.released - m.paid, 'charge not covered by the wallet', ${a.take} > m.paid))
                             as k(n, kind, amount, after, note, written)`;

/**
 * Whether settleWalletCtes settled the wallet (1) or had nothing to settle (0); when `fenced` (an SQL
 * boolean) holds and the balance did not cover the hold, it raises (`wr_refuse`, SQLSTATE WR001) rather
 * than return a row, so a COMMIT sent with the statement does not happen.
 */
export const walletSettled = (fenced: string) =>
  `case when exists (select 1 from w) then 1 when ${fenced} then wr_refuse('the wallet balance does not cover the run price') else 0 end as settled`;

/**
 * The wallet settlement, one statement (settleWalletCtes). $1 account, $2 run id, $3 hold, $4 charge
 * to take, $5 taken (of the hold, now), $6 fenced, $7 workflow whose completed run is counted, or null.
 */
export const SETTLE_WALLET = statement(
  'settle_wallet',
  `with ${countCompletedRunCte({ workflow: '$7::uuid' })},
     ${settleWalletCtes({ account: '$1::uuid', run: '$2::uuid', hold: '$3::numeric', take: '$4::numeric', taken: '$5::numeric' })}
     select ${walletSettled('$6::boolean')}`,
  [WorkflowRunTallySchema, WalletSchema, LedgerEntrySchema],
);
export const SETTLE_WALLET_AND_COMMIT = andCommit('settle_wallet_and_commit', SETTLE_WALLET);
