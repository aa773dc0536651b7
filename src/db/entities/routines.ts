import { Routine } from '@mikro-orm/core';
import { SPEND_CAP_REFUSALS_BODY } from '../migrations/Migration20261204380000AcceptRunsInBatches.ts';

/**
 * `wr_spend_cap_refusals(ords, key_ids, since, prices, caps, accounts, idempotency_keys)`: the spend-cap
 * check of a batch of POST /runs (src/sql/accept-runs.ts; docs/design/money.md#spend-caps), one element
 * per capped call in call order. It locks the keys' rows (in id order), so acceptances on one key pass
 * one after another, then sums each key's `cap_usd` in its window in a query of its own: a volatile
 * function's queries take a fresh snapshot, so the sum sees every run committed by whoever held the lock
 * before (the statement's own snapshot, taken before the lock was granted, would not). A call whose
 * idempotency key has a live record replays and reserves nothing. Per key, in call order, a call does not
 * fit when the window's amount, plus the prices of the earlier calls that fit, plus its own exceed the
 * cap. Returns the ords of the calls that do not fit.
 */
export const SpendCapRefusalsRoutine = new Routine({
  name: 'wr_spend_cap_refusals',
  type: 'function',
  language: 'plpgsql',
  params: {
    ords: { type: 'bigint[]' },
    key_ids: { type: 'uuid[]' },
    since: { type: 'timestamp with time zone[]' },
    prices: { type: 'numeric[]' },
    caps: { type: 'numeric[]' },
    accounts: { type: 'uuid[]' },
    idempotency_keys: { type: 'text[]' },
  },
  returns: { runtimeType: 'object', columnType: 'bigint[]' },
  body: SPEND_CAP_REFUSALS_BODY,
});

/**
 * `wr_run_charge(charged, status, creator_price, compute)`: what a finished run owes, null when it is not
 * charged (docs/design/money.md#what-is-charged). `charged` is what the run's ending charges: `none`
 * (cancelled, queue timeout, insufficient funds), `compute` (completed_with_issues, failed nodes, the
 * compute limit: nothing when that compute is 0 and the run did not complete) or `full` (the creator price
 * charged to this caller, 0 otherwise, plus compute). A completed run is charged at least 0. The one
 * definition of the charge: FINISH_RUNS (src/sql/finish-runs.ts) calls it. Immutable and a single
 * `select`, so the planner inlines it (no function call per row).
 */
export const RunChargeRoutine = new Routine({
  name: 'wr_run_charge',
  type: 'function',
  language: 'sql',
  deterministic: true,
  params: { charged: { type: 'text' }, status: { type: 'text' }, creator_price: { type: 'numeric' }, compute: { type: 'numeric' } },
  returns: { runtimeType: 'string', columnType: 'numeric' },
  body: `select round(case when charged = 'full' then creator_price + compute
  when charged = 'compute' and (compute <> 0 or status = 'completed') then compute when status = 'completed' then 0 end, 6)`,
});

/**
 * `wr_billed(charge, bundle_price)`: what is recorded as the run's charge. A bundle run (`bundle_price`
 * its bundle's price per run, else null) is billed the bundle's price whatever it owes, unless it is not
 * charged at all (then its bundle run is given back).
 */
export const BilledRoutine = new Routine({
  name: 'wr_billed',
  type: 'function',
  language: 'sql',
  deterministic: true,
  params: { charge: { type: 'numeric' }, bundle_price: { type: 'numeric' } },
  returns: { runtimeType: 'string', columnType: 'numeric' },
  body: 'select case when charge is not null then coalesce(bundle_price, charge) end',
});

/**
 * `wr_within_compute_limit(compute, steps, step_usd, compute_limit)`: whether `steps` more steps keep the
 * run's compute within its limit (null `steps`: no steps, always). The one definition of the compute limit
 * (docs/design/money.md): the fenced writes refuse a step that would cross it (src/sql/fenced-write.ts,
 * src/sql/finish-runs.ts), and readRun (src/runs/run-state.ts) says whether the next
 * step fits, so the engine fails the run rather than start that step.
 */
export const ComputeLimitRoutine = new Routine({
  name: 'wr_within_compute_limit',
  type: 'function',
  language: 'sql',
  deterministic: true,
  params: { compute: { type: 'numeric' }, steps: { type: 'int' }, step_usd: { type: 'numeric' }, compute_limit: { type: 'numeric' } },
  returns: { runtimeType: 'boolean', columnType: 'boolean' },
  body: 'select steps is null or compute + steps * step_usd <= compute_limit',
});

/**
 * `wr_wallet_holds(balance, hold)`: whether a wallet's balance covers a hold, so the run may be funded by
 * it. With wr_wallet_paid, the wallet rule, one definition for every statement that moves a wallet
 * (src/sql/run-money.ts): funding runs, ending them, runs started and ended at once.
 */
export const WalletHoldsRoutine = new Routine({
  name: 'wr_wallet_holds',
  type: 'function',
  language: 'sql',
  deterministic: true,
  params: { balance: { type: 'numeric' }, hold: { type: 'numeric' } },
  returns: { runtimeType: 'boolean', columnType: 'boolean' },
  body: 'select balance >= hold',
});

/**
 * `wr_wallet_paid(balance, charge)`: what a wallet whose balance is `balance` (its hold released) pays
 * of a charge; the rest is recorded as unpaid, not moved, so a wallet never goes below zero.
 */
export const WalletPaidRoutine = new Routine({
  name: 'wr_wallet_paid',
  type: 'function',
  language: 'sql',
  deterministic: true,
  params: { balance: { type: 'numeric' }, charge: { type: 'numeric' } },
  returns: { runtimeType: 'string', columnType: 'numeric' },
  body: 'select least(charge, balance)',
});

export const routines = [SpendCapRefusalsRoutine, RunChargeRoutine, BilledRoutine, ComputeLimitRoutine, WalletHoldsRoutine, WalletPaidRoutine];
