import { statement } from '../db/statement.ts';

/**
 * The POST /runs window of an API key (docs/operations.md#rate-limit): one row per key holding 60
 * one-second buckets, `counts[60]` for the second `second` (epoch seconds) and `counts[i]` for
 * `second - 60 + i`, so a request costs the same whatever the key's limit.
 *
 * `rateHitCte(key, limit)` is a CTE `hit` counting one request of key `key` (a placeholder) unless the
 * window is full; it counts nothing when `limit` is null. ON CONFLICT DO UPDATE locks the key's row and
 * reads its newest committed version, so concurrent requests of one key (from any process) are counted
 * one after another. The buckets are first shifted to the current second (a statement that started a
 * little before the row's second counts in the row's newest bucket), then the newest bucket gains one
 * when the shifted total is below the limit. Times are the database's (`now()`), one clock for all
 * processes. Returns `allowed`, `counted` (the window's total after this request), `oldest_ms` (the
 * start of the oldest non-empty bucket: a request leaves the window 60 s after the start of its second)
 * and `now_ms`.
 */
export const rateHitCte = (key: string, limit: string): string => `hit as (
  insert into api_key_rate_windows as w (api_key_id, second, counts, allowed)
  select ${key}::uuid, floor(extract(epoch from now()))::bigint, array_fill(0, array[59]) || 1, true where ${limit}::int is not null
  on conflict (api_key_id) do update set (second, counts, allowed) = (
    select k.second, k.kept[1:59] || (k.kept[60] + case when k.total < ${limit}::int then 1 else 0 end), k.total < ${limit}::int
      from (select s.second, s.kept, (select sum(c) from unnest(s.kept) c) as total
              from (select greatest(w.second, excluded.second) as second,
                           case when excluded.second - w.second >= 60 then array_fill(0, array[60])
                                when excluded.second <= w.second then w.counts
                                else w.counts[(excluded.second - w.second + 1)::int:60] || array_fill(0, array[(excluded.second - w.second)::int]) end as kept) s) k)
  returning allowed, (select sum(c) from unnest(counts) c)::int as counted,
    ((second - 60 + (select min(i) from generate_subscripts(counts, 1) i where counts[i] > 0)) * 1000)::float8 as oldest_ms,
    (extract(epoch from now()) * 1000)::float8 as now_ms)`;

/** What `hit` returns: whether the request was counted, the window's total after it, and the times of the window (ms). */
export interface HitRow {
  allowed: boolean;
  counted: number;
  oldest_ms: number;
  now_ms: number;
}

/** Counts one POST /runs of an API key on its own (a request that does not reach acceptance). $1 API key id, $2 its limit per minute. */
export const HIT_RATE_WINDOW = statement('hit_rate_window', `with ${rateHitCte('$1', '$2')} select * from hit`);
