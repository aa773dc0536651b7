import { Routine } from '@mikro-orm/core';

/**
 * `wr_refuse(reason)` raises SQLSTATE WR001 with the reason as its message, for a statement that must
 * fail, not return nothing, when its fence does not hold: the wallet settlement travels with its
 * transaction's COMMIT (src/db/prepared.ts `withCommit`), and only an error stops that COMMIT.
 */
export const RefuseRoutine = new Routine({
  name: 'wr_refuse',
  type: 'function',
  language: 'plpgsql',
  params: { reason: { type: 'text' } },
  returns: { runtimeType: 'number', columnType: 'int' },
  body: `begin
  raise exception using errcode = 'WR001', message = reason;
end`,
});

/**
 * `wr_reserve_spend_cap(key, since, price, cap)`: the spend-cap reservation of POST /runs inside its one
 * statement (src/sql/accept-run.ts). It locks the key's row, so acceptances on one key pass one after
 * another, and sums the key's `cap_usd` in its window in a query of its own: a volatile function's
 * queries take a fresh snapshot, so the sum sees every run committed by whoever held the lock before
 * (the statement's own snapshot, taken before the lock was granted, would not). Raises SQLSTATE WR002
 * when `price` does not fit; returns 1 otherwise.
 */
export const SpendCapRoutine = new Routine({
  name: 'wr_reserve_spend_cap',
  type: 'function',
  language: 'plpgsql',
  params: { key: { type: 'uuid' }, since: { type: 'timestamptz' }, price: { type: 'numeric' }, cap: { type: 'numeric' } },
  returns: { runtimeType: 'number', columnType: 'int' },
  body: `begin
  perform 1 from api_keys where id = key for update;
  if (select coalesce(sum(cap_usd), 0) from runs where api_key_id = key and created_at >= since) + price > cap then
    raise exception using errcode = 'WR002', message = 'spend cap reached';
  end if;
  return 1;
end`,
});

/**
 * `wr_run_charge(charged, status, creator_price, compute)`: what a finished run owes, null when it is not
 * charged (docs/design/money.md#what-is-charged). `charged` is what the run's ending charges: `none`
 * (cancelled, queue timeout, insufficient funds), `compute` (completed_with_issues, failed nodes, the
 * compute limit: nothing when that compute is 0 and the run did not complete) or `full` (the creator price
 * charged to this caller, 0 otherwise, plus compute). A completed run is charged at least 0. The one
 * definition of the charge: FINISH_RUN and FINISH_RUNS_IN_MEMORY call it. Immutable and a single
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
 * src/sql/finish-runs-in-memory.ts), and readRun (src/runs/run-state.ts) says whether the next
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

export const routines = [RefuseRoutine, SpendCapRoutine, RunChargeRoutine, BilledRoutine, ComputeLimitRoutine];
