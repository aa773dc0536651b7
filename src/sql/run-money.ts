/**
 * How money moves for runs, written once for the statement that funds runs (FUND_RUNS,
 * src/sql/fund-runs.ts) and the one that ends them (FINISH_RUNS, src/sql/finish-runs.ts):
 * docs/design/money.md. Both hand these CTEs a CTE named `money_call`, one row per run in call order:
 *
 *   ord, run_id, account_id, workflow_id, version_id; `fund_now` (the run is funded by this statement: a
 *   bundle of its account, workflow and version while it has runs left, else a wallet hold of `price`);
 *   `price` (the hold); `funded_by`, `funded_bundle`, `held` (how it was funded before: `runs.funding`,
 *   `bundle_id`, `hold_usd`); `ending` (the run ends in this statement); `charge` (what it owes,
 *   wr_run_charge: null when it is not charged).
 *
 * moneyPlan adds, run after run per account, what each run moves; moneyWrites writes it. The wallet rule
 * is the SQL functions `wr_wallet_holds` and `wr_wallet_paid` (src/db/entities/routines.ts); the charge
 * is `wr_run_charge` and `wr_billed`.
 */

/**
 * The CTEs `bundle_locked` (the bundles a run may take or give back, locked in id order), `money_placed`
 * (money_call with `bundle_id`, `billed`, `taken` (a hold taken now), `released` (a hold released),
 * `take` (the charge to take from the wallet), `bundle_delta` (runs given back, or taken when negative)),
 * `wallet_run`, `wallet_locked`, `wallet_fold` (each wallet run's `opening` and `closing` balance, and
 * whether the wallet `covered` its hold) and `money_moved` (money_placed without the runs funded now whose
 * hold no wallet covered: the balance left by the runs before, or no wallet at all). A run funded now that is not charged takes no bundle run (it would get it
 * back at once), so a bundle's runs left count only the charged runs before it.
 */
export const MONEY_PLAN = `bundle_locked as (
  select b.id, b.account_id, b.workflow_id, b.version_id, b.usd_per_run, b.runs_left
    from bundles b
   where (b.runs_left > 0 and exists (select 1 from money_call m where m.fund_now and m.account_id = b.account_id
                                                             and m.workflow_id = b.workflow_id and m.version_id = b.version_id))
      or b.id in (select m.funded_bundle from money_call m where m.funded_by = 'bundle')
   order by b.id
     for update of b),
bundle_place as (
  select m.*, m.fund_now and (not m.ending or m.charge is not null) as consumes,
         count(*) filter (where m.fund_now and (not m.ending or m.charge is not null))
           over (partition by m.account_id, m.workflow_id, m.version_id order by m.ord rows between unbounded preceding and 1 preceding) as taken_before
    from money_call m),
money_placed as (
  select p.*, locked.id as bundle_id, wr_billed(p.charge, locked.usd_per_run) as billed,
         case when p.fund_now and locked.id is null then p.price else 0 end as taken,
         case when not p.ending or locked.id is not null then 0 when p.fund_now then p.price else p.held end as released,
         case when p.ending and locked.id is null and (p.fund_now or p.funded_by is not null) then coalesce(p.charge, 0) else 0 end as take,
         case when p.consumes and locked.id is not null then -1
              when p.ending and not p.fund_now and locked.id is not null and p.charge is null then 1 else 0 end
           as bundle_delta
    from bundle_place p
    left join bundle_locked locked
      on (p.fund_now and locked.account_id = p.account_id and locked.workflow_id = p.workflow_id and locked.version_id = p.version_id
          and p.taken_before < locked.runs_left)
      or (not p.fund_now and p.funded_by = 'bundle' and locked.id = p.funded_bundle)),
wallet_run as (
  select placed.ord, placed.account_id, placed.taken, placed.released, placed.take,
         row_number() over (partition by placed.account_id order by placed.ord) as n
    from money_placed placed where placed.bundle_id is null and (placed.taken <> 0 or placed.released <> 0 or placed.take <> 0)),
wallet_locked as (
  select wallets.account_id, wallets.balance_usd from wallets
   where wallets.account_id in (select account_id from wallet_run)
   order by wallets.account_id
     for update of wallets),
wallet_fold(account_id, n, ord, opening, closing, covered, taken, released) as (
  select account_id, 0::bigint, 0::bigint, balance_usd::numeric, balance_usd::numeric, false, 0::numeric, 0::numeric from wallet_locked
  union all
  select folded.account_id, next_run.n, next_run.ord, folded.closing,
         case when wr_wallet_holds(folded.closing, next_run.taken)
              then folded.closing - next_run.taken + next_run.released
                   - wr_wallet_paid(folded.closing - next_run.taken + next_run.released, next_run.take)
              else folded.closing end,
         wr_wallet_holds(folded.closing, next_run.taken), next_run.taken, next_run.released
    from wallet_fold folded join wallet_run next_run on next_run.account_id = folded.account_id and next_run.n = folded.n + 1),
money_moved as (
  select placed.* from money_placed placed
   where placed.taken = 0 or placed.ord in (select ord from wallet_fold where covered))`;

/**
 * The CTEs writing what MONEY_PLAN moved: the bundles' runs left, each wallet's balance (its last
 * closing) and held amount, and the ledger rows of every wallet run, each with the balance after it:
 * `hold` (taken now), `release`, `charge` (what the balance pays) and `unpaid` (the rest, recorded, not
 * moved). A wallet no run of which it covered is left unwritten.
 */
export const MONEY_WRITES = `bundle_moved as (
  update bundles set runs_left = bundles.runs_left + moved.delta
    from (select bundle_id, sum(bundle_delta) as delta from money_moved where bundle_delta <> 0 group by bundle_id) moved
   where bundles.id = moved.bundle_id),
wallet_moved as (
  update wallets set balance_usd = last.closing, held_usd = wallets.held_usd + last.held, updated_at = now()
    from (select distinct on (account_id) account_id, closing,
                 sum(taken - released) filter (where covered) over (partition by account_id) as held
            from wallet_fold where n > 0 order by account_id, n desc) last
   where wallets.account_id = last.account_id and last.account_id in (select account_id from wallet_fold where covered)),
ledger as (
  insert into ledger_entries (account_id, run_id, kind, amount_usd, balance_after_usd, note, created_at)
  select wallet_fold.account_id, moved.run_id, k.kind, k.amount, k.after, k.note, now()
    from wallet_fold join money_moved moved on moved.ord = wallet_fold.ord
         cross join lateral (select wallet_fold.opening - moved.taken + moved.released as released_to) m
         cross join lateral (select wr_wallet_paid(m.released_to, moved.take) as paid) c
         cross join lateral (values (1, 'hold', -moved.taken, wallet_fold.opening - moved.taken, 'hold for run', moved.taken > 0),
                                    (2, 'release', moved.released, m.released_to, 'hold released at settlement', moved.released > 0),
                                    (3, 'charge', -c.paid, m.released_to - c.paid, 'run charge', c.paid > 0),
                                    (4, 'unpaid', moved.take - c.paid, m.released_to - c.paid, 'charge not covered by the wallet', moved.take > c.paid))
                             as k(n, kind, amount, after, note, written)
   where wallet_fold.covered and k.written
   order by wallet_fold.ord, k.n)`;
