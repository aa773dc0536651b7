import { statement } from '../db/statement.ts';
import { BundleSchema, LedgerEntrySchema, WalletSchema, WorkflowRunTallySchema } from '../db/entities/index.ts';

/**
 * Settling a run's funding (src/billing/settle-run.ts, docs/design/money.md): tables `wallets`,
 * `ledger_entries`, `bundles` and `workflow_run_tallies`.
 */

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

/**
 * COUNT_COMPLETED_RUN as the CTE `t` of a settlement: one more completed run of `workflow` (an SQL
 * expression) for each row of `from` (a CTE or table, optional) where `where` holds, when `workflow` is
 * not null. Nothing reads it, so Postgres runs it after the main query: the tally row is locked after the
 * bundle or wallet row.
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

/**
 * The ledger rows of one run's wallet settlement, the one place they are written (SETTLE_WALLET and
 * FINISH_RUNS_IN_MEMORY, src/sql/finish-runs-in-memory.ts): joined LATERAL as
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
 * The wallet settlement of a run whose hold was taken at preparation, one statement: the hold is
 * released and the charge taken from the resulting balance, never below zero; the ledger reads hold
 * (none now), release, charge, unpaid, each with the balance after it (ledgerRows); held_usd drops by
 * the hold. $1 account, $2 run id, $3 hold, $4 charge to take, $5 workflow whose completed run is
 * counted, or null.
 */
export const SETTLE_WALLET = statement(
  'settle_wallet',
  `with ${countCompletedRunCte({ workflow: '$5::uuid' })},
     locked_wallet as (
       select wallets.account_id, wallets.balance_usd from wallets where wallets.account_id = $1::uuid for update of wallets),
     settled_wallet as (
       update wallets set balance_usd = locked_wallet.balance_usd + $3::numeric - least($4::numeric, locked_wallet.balance_usd + $3::numeric),
                          held_usd = wallets.held_usd - $3::numeric, updated_at = now()
         from locked_wallet where wallets.account_id = locked_wallet.account_id
         returning locked_wallet.balance_usd as opening),
     ledger as (
       insert into ledger_entries (account_id, run_id, kind, amount_usd, balance_after_usd, note, created_at)
       select $1::uuid, $2::uuid, k.kind, k.amount, k.after, k.note, now()
         from settled_wallet ${ledgerRows({ balance: 'settled_wallet.opening', taken: '0', hold: '$3::numeric', take: '$4::numeric' })}
        where k.written order by k.n)
     select 1 as settled`,
  [WorkflowRunTallySchema, WalletSchema, LedgerEntrySchema],
);
