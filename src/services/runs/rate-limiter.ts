import { ApiError } from '../../domain/errors.ts';
import type { Orm } from '../../db/orm.ts';
import { prepared } from '../../db/prepared.ts';

/**
 * The POST /runs limit: a sliding 60-second window per API key. Every request that reaches the
 * limiter counts, whatever its outcome; a 429 does not.
 *
 * On a Postgres server the window is a row per key (`api_key_rate_windows`), so every API process on
 * the database enforces one limit; embedded PGlite is one process by construction and keeps it in
 * memory.
 */

export const WINDOW_MS = 60_000;

export interface RateDecision {
  limit: number;
  remaining: number;
  /** Seconds until the oldest counted request leaves the window (when a slot frees up). */
  resetSeconds: number;
}

export interface RateLimiter {
  /** Counts the request or throws 429 `rate_limited` with Retry-After. */
  hit(keyId: string, limit: number): Promise<RateDecision>;
}

function refuse(limit: number, oldestMs: number, now: number): never {
  const retry = Math.max(1, Math.ceil((oldestMs + WINDOW_MS - now) / 1000));
  throw new ApiError('rate_limited', `more than ${limit} POST /runs per minute for this API key; retry in ${retry} s`, {
    headers: { 'Retry-After': String(retry), ...headersOf({ limit, remaining: 0, resetSeconds: retry }) },
  });
}

const decision = (limit: number, counted: number, oldestMs: number, now: number): RateDecision => ({
  limit,
  remaining: Math.max(0, limit - counted),
  resetSeconds: Math.max(0, Math.ceil((oldestMs + WINDOW_MS - now) / 1000)),
});

export class SlidingWindowLimiter implements RateLimiter {
  readonly #hits = new Map<string, number[]>();

  async hit(keyId: string, limit: number, now = Date.now()): Promise<RateDecision> {
    const hits = this.#prune(keyId, now);
    if (hits.length >= limit) refuse(limit, hits[0]!, now);
    hits.push(now);
    this.#hits.set(keyId, hits);
    return decision(limit, hits.length, hits[0]!, now);
  }

  #prune(keyId: string, now: number): number[] {
    const hits = this.#hits.get(keyId) ?? [];
    let i = 0;
    // A hit exactly WINDOW_MS old has left the window.
    while (i < hits.length && hits[i]! <= now - WINDOW_MS) i++;
    const kept = i ? hits.slice(i) : hits;
    if (kept.length === 0) this.#hits.delete(keyId);
    return kept;
  }
}

/**
 * One statement per request. ON CONFLICT DO UPDATE locks the key's row and reads its newest committed
 * version, so concurrent requests of one key (from any process) are counted one after another; every
 * SET expression sees the row as it was, so `allowed` and the new `hits` agree. Times are the
 * database's (`now()`), one clock for all processes.
 */
const HIT_SQL = prepared(`insert into api_key_rate_windows as w (api_key_id, hits, allowed)
values (?, array[now()], true)
on conflict (api_key_id) do update set
  allowed = (select count(*) from unnest(w.hits) h where h > now() - interval '60 seconds') < ?,
  hits = array(select h from unnest(w.hits) h where h > now() - interval '60 seconds' order by h)
    || case when (select count(*) from unnest(w.hits) h where h > now() - interval '60 seconds') < ? then array[now()] else '{}'::timestamptz[] end
returning allowed, cardinality(hits) as counted,
  (extract(epoch from hits[1]) * 1000)::float8 as oldest_ms, (extract(epoch from now()) * 1000)::float8 as now_ms`);

export class PostgresWindowLimiter implements RateLimiter {
  readonly #orm: Orm;

  constructor(orm: Orm) {
    this.#orm = orm;
  }

  async hit(keyId: string, limit: number): Promise<RateDecision> {
    const [r] = await this.#orm.em
      .fork()
      .execute<{ allowed: boolean; counted: number; oldest_ms: number; now_ms: number }[]>(HIT_SQL, [keyId, limit, limit]);
    const now = Number(r!.now_ms);
    const oldest = Number(r!.oldest_ms);
    if (!r!.allowed) refuse(limit, oldest, now);
    return decision(limit, Number(r!.counted), oldest, now);
  }
}

export function headersOf(d: RateDecision): Record<string, string> {
  return { 'RateLimit-Limit': String(d.limit), 'RateLimit-Remaining': String(d.remaining), 'RateLimit-Reset': String(d.resetSeconds) };
}
