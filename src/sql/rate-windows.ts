import { statement } from '../db/statement.ts';

/**
 * Counts one POST /runs of an API key in its 60-second window, unless the window is full. $1 API key
 * id, $2 the key's limit per minute. ON CONFLICT DO UPDATE locks the key's row and reads its newest
 * committed version, so concurrent requests of one key (from any process) are counted one after
 * another; every SET expression sees the row as it was, so `allowed` and the new `hits` agree. Times
 * are the database's (`now()`), one clock for all processes.
 */
export const HIT_RATE_WINDOW = statement(
  'hit_rate_window',
  `insert into api_key_rate_windows as w (api_key_id, hits, allowed)
values ($1, array[now()], true)
on conflict (api_key_id) do update set
  allowed = (select count(*) from unnest(w.hits) h where h > now() - interval '60 seconds') < $2,
  hits = array(select h from unnest(w.hits) h where h > now() - interval '60 seconds' order by h)
    || case when (select count(*) from unnest(w.hits) h where h > now() - interval '60 seconds') < $2 then array[now()] else '{}'::timestamptz[] end
returning allowed, cardinality(hits) as counted,
  (extract(epoch from hits[1]) * 1000)::float8 as oldest_ms, (extract(epoch from now()) * 1000)::float8 as now_ms`,
);
