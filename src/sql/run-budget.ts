import { statement } from '../db/statement.ts';
import { ApiKeyRunWindowSchema } from '../db/entities/index.ts';
import { SHIFTED_WINDOW } from './rate-windows.ts';

/**
 * $1 API key id, $2 its run budget per minute, $3 the runs of one batch: draws them from the key's run
 * window (api_key_run_windows, shaped and shifted like its request window: src/sql/rate-windows.ts)
 * when the window's total plus $3 is within the budget, else draws nothing. ON CONFLICT DO UPDATE locks
 * the key's row, so the draws of every process on the database are counted one after another. Returns
 * `allowed`, `counted` (the window's total after the draw), `oldest_ms` (the start of the oldest
 * non-empty bucket, null when none) and `now_ms`; no row when a first draw does not fit.
 */
export const DRAW_RUN_BUDGET = statement(
  'draw_run_budget',
  `with hit as (
  insert into api_key_run_windows as w (api_key_id, second, counts, total, total_second, allowed)
  select $1::uuid, s.second, array_fill(0, array[59]) || $3::int, $3::int, s.second, true
    from (select floor(extract(epoch from now()))::bigint as second) s where $3::int <= $2::int
  on conflict (api_key_id) do update set (second, counts, total, total_second, allowed) = (
    select k.second, k.kept[1:59] || (k.kept[60] + k.n), k.total + k.n, k.second, k.n = excluded.total
      from (select s.second, s.kept, s.total, case when s.total + excluded.total <= $2::int then excluded.total else 0 end as n
              from ${SHIFTED_WINDOW} s
            offset 0) k)
  returning allowed, total as counted,
    ((second - 60 + array_position(counts::boolean[], true)) * 1000)::float8 as oldest_ms,
    (extract(epoch from now()) * 1000)::float8 as now_ms)
select * from hit`,
  [ApiKeyRunWindowSchema],
);
