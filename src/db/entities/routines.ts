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

export const routines = [RefuseRoutine, SpendCapRoutine];
