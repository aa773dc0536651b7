import { ApiError } from '../../domain/errors.ts';

/**
 * The POST /runs limit (contract §8): a sliding 60-second window per API key. Every request that
 * reaches the limiter counts, whatever its outcome; a 429 does not. In-process: with several API
 * processes each enforces the limit on its own share (see README, "what is left").
 */

export const WINDOW_MS = 60_000;

export interface RateDecision {
  limit: number;
  remaining: number;
  /** Seconds until the oldest counted request leaves the window (when a slot frees up). */
  resetSeconds: number;
}

export class SlidingWindowLimiter {
  readonly #hits = new Map<string, number[]>();

  /** Counts the request or throws 429 `rate_limited` with Retry-After. */
  hit(keyId: string, limit: number, now = Date.now()): RateDecision {
    const hits = this.#prune(keyId, now);
    if (hits.length >= limit) {
      const retry = Math.max(1, Math.ceil((hits[0]! + WINDOW_MS - now) / 1000));
      throw new ApiError('rate_limited', `more than ${limit} POST /runs per minute for this API key; retry in ${retry} s`, {
        headers: { 'Retry-After': String(retry), ...headersOf({ limit, remaining: 0, resetSeconds: retry }) },
      });
    }
    hits.push(now);
    this.#hits.set(keyId, hits);
    return { limit, remaining: limit - hits.length, resetSeconds: Math.max(0, Math.ceil((hits[0]! + WINDOW_MS - now) / 1000)) };
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

export function headersOf(d: RateDecision): Record<string, string> {
  return { 'RateLimit-Limit': String(d.limit), 'RateLimit-Remaining': String(d.remaining), 'RateLimit-Reset': String(d.resetSeconds) };
}
