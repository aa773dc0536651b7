import { statement } from '../db/statement.ts';
import { ApiKeyRateWindowSchema } from '../db/entities/index.ts';

/**
 * The window of row `w` (api_key_rate_windows) shifted to the second of the row proposed for insertion
 * (`excluded`), inside ON CONFLICT DO UPDATE: `second`, `kept` (the 60 buckets) and `total`. See rateHitCte.
 */
export const SHIFTED_WINDOW = `(select greatest(w.second, excluded.second) as second,
                           case when d.n >= 60 then array_fill(0, array[60])
                                when d.n <= 0 then w.counts
                                else w.counts[d.n + 1:60] || array_fill(0, array[d.n]) end as kept,
                           case when d.n >= 60 then 0
                                when d.n <= 0 then d.total
                                when d.n = 1 then d.total - w.counts[1]
                                else d.total - (select sum(c) from unnest(w.counts[1:d.n]) c) end as total
                      from (select (excluded.second - w.second)::int as n,
                                   case when w.total_second is not distinct from w.second then w.total
                                        else (select coalesce(sum(c), 0) from unnest(w.counts) c)::int end as total
                             offset 0) d)`;

/**
 * The POST /runs window of an API key (docs/design/rules.md#rate-limit): one row per key holding 60
 * one-second buckets, `counts[60]` for the second `second` (epoch seconds) and `counts[i]` for
 * `second - 60 + i`, and their sum `total`, so a request costs the same whatever the key's limit.
 *
 * `rateHitCte(key, limit)` is a CTE `hit` counting one request of key `key` (a placeholder) unless the
 * window is full; it counts nothing when `limit` is null. ON CONFLICT DO UPDATE locks the key's row and
 * reads its newest committed version, so concurrent requests of one key (from any process) are counted
 * one after another. The buckets are first shifted to the current second (a statement that started a
 * little before the row's second counts in the row's newest bucket), the buckets shifted out leaving
 * the total, then the newest bucket and the total gain one when the shifted total is below the limit.
 * The total is kept rather than added up because adding up an array takes a set-returning function, a
 * tuplestore per call: a shift of one second, the usual case, subtracts one bucket. `total_second` is
 * the `second` the total was kept for: a row whose buckets were last written without their total (by a
 * process of an older version, during an upgrade) has its total added up again. Times are the
 * database's (`now()`), one clock for all processes. Returns `allowed`, `counted` (the window's total
 * after this request), `oldest_ms` (the start of the oldest non-empty bucket: a request leaves the
 * window 60 s after the start of its second) and `now_ms`.
 */
export const rateHitCte = (key: string, limit: string): string => `hit as (
  insert into api_key_rate_windows as w (api_key_id, second, counts, total, total_second, allowed, last_counted)
  select ${key}::uuid, s.second, array_fill(0, array[59]) || 1, 1, s.second, true, 1
    from (select floor(extract(epoch from now()))::bigint as second) s where ${limit}::int is not null
  on conflict (api_key_id) do update set (second, counts, total, total_second, allowed, last_counted) = (
    select k.second, k.kept[1:59] || (k.kept[60] + k.one), k.total + k.one, k.second, k.one = 1, k.one
      from (select s.second, s.kept, s.total, case when s.total < ${limit}::int then 1 else 0 end as one
              from ${SHIFTED_WINDOW} s
            offset 0) k)
  returning allowed, total as counted,
    ((second - 60 + array_position(counts::boolean[], true)) * 1000)::float8 as oldest_ms,
    (extract(epoch from now()) * 1000)::float8 as now_ms)`;

/** What `hit` returns: whether the request was counted, the window's total after it, and the times of the window (ms). */
export interface HitRow {
  allowed: boolean;
  counted: number;
  oldest_ms: number;
  now_ms: number;
}

/**
 * CTEs counting a set of calls in their keys' windows, over a CTE `call` (`ord`, `api_key_id`,
 * `rate_limit`; a call with a null limit is not counted): `window_count`, one upsert per key in key order
 * (the row stays locked until the commit), where the k-th call of a key is allowed iff the window's total
 * before the set plus k is within the limit and only allowed calls are counted; `call_rate`, each counted
 * call's `allowed`, `counted` (the window's total after it) and `oldest_ms`.
 */
export const COUNT_CALLS = `counted_call as (
  select ord, api_key_id, row_number() over (partition by api_key_id order by ord)::int as key_rank from call where rate_limit is not null),
key_count as (
  select api_key_id, count(*)::int as requested, min(rate_limit) as rate_limit from call where rate_limit is not null group by api_key_id),
window_count as (
  insert into api_key_rate_windows as w (api_key_id, second, counts, total, total_second, allowed, last_counted)
  select k.api_key_id, s.second, array_fill(0, array[59]) || n.allowed, n.allowed, s.second, n.allowed = k.requested, n.allowed
    from key_count k
   cross join (select floor(extract(epoch from now()))::bigint as second) s
   cross join lateral (select least(k.requested, greatest(k.rate_limit, 1)) as allowed) n
   order by k.api_key_id
  on conflict (api_key_id) do update set (second, counts, total, total_second, allowed, last_counted) = (
    select q.second, q.kept[1:59] || (q.kept[60] + q.allowed), q.total + q.allowed, q.second, q.allowed = q.requested, q.allowed
      from (select s.second, s.kept, s.total, k.requested, least(k.requested, greatest(k.rate_limit - s.total, 0)) as allowed
              from ${SHIFTED_WINDOW} s, key_count k
             where k.api_key_id = excluded.api_key_id
            offset 0) q)
  returning api_key_id, total, last_counted, ((second - 60 + array_position(counts::boolean[], true)) * 1000)::float8 as oldest_ms),
call_rate as (
  select c.ord, c.key_rank <= h.last_counted as allowed, h.total - h.last_counted + least(c.key_rank, h.last_counted) as counted, h.oldest_ms
    from counted_call c join window_count h on h.api_key_id = c.api_key_id)`;

/**
 * Counts start requests in their keys' windows, many in one statement (src/runs/rate-limiter.ts: the
 * requests of a process that arrive while one count is on its way go together as the next, so a key's
 * row is locked once per set, not once per request). $1 API key ids, $2 their limits, one per request.
 */
export const COUNT_REQUESTS = statement(
  'count_requests',
  `with call as materialized (
  select * from unnest($1::uuid[], $2::int[]) with ordinality as call(api_key_id, rate_limit, ord)),
${COUNT_CALLS}
select r.ord, r.allowed, r.counted, r.oldest_ms, (extract(epoch from now()) * 1000)::float8 as now_ms from call_rate r order by r.ord`,
  [ApiKeyRateWindowSchema],
);
