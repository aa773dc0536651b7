import { ApiError, type RateLimitState } from '../../domain/errors.ts';
import type { Orm } from '../../db/orm.ts';
import { query } from '../../db/statement.ts';
import { HIT_RATE_WINDOW } from '../../sql/rate-windows.ts';
import { requestRateLimited } from '../../observability/metrics.ts';

/**
 * The POST /runs limit: a sliding 60-second window per API key. Every request that reaches the
 * limiter counts, whatever its outcome; a 429 does not.
 *
 * On a Postgres server the window is a row per key (`api_key_rate_windows`), so every API process on
 * the database enforces one limit; embedded PGlite is one process by construction and keeps it in
 * memory.
 */

export const WINDOW_MS = 60_000;

export type RateDecision = RateLimitState;

export interface RateLimiter {
  /** Counts the request or throws 429 `rate_limited` (with when to retry). */
  hit(keyId: string, limit: number): Promise<RateDecision>;
}

function refuse(limit: number, oldestMs: number, now: number): never {
  requestRateLimited('runs_per_minute');
  const retry = Math.max(1, Math.ceil((oldestMs + WINDOW_MS - now) / 1000));
  throw new ApiError('rate_limited', `more than ${limit} POST /runs per minute for this API key; retry in ${retry} s`, {
    retryAfterSeconds: retry,
    rateLimit: { limit, remaining: 0, resetSeconds: retry },
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

export class PostgresWindowLimiter implements RateLimiter {
  readonly #orm: Orm;

  constructor(orm: Orm) {
    this.#orm = orm;
  }

  async hit(keyId: string, limit: number): Promise<RateDecision> {
    const [r] = await query<{ allowed: boolean; counted: number; oldest_ms: number; now_ms: number }>(this.#orm.em.fork(), HIT_RATE_WINDOW, [keyId, limit]);
    const now = Number(r!.now_ms);
    const oldest = Number(r!.oldest_ms);
    if (!r!.allowed) refuse(limit, oldest, now);
    return decision(limit, Number(r!.counted), oldest, now);
  }
}
