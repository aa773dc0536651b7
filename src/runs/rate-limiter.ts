import { ApiError, type RateLimitState } from '../domain/errors.ts';
import type { Orm } from '../db/orm.ts';
import { outsideTransaction, query } from '../db/statement.ts';
import { COUNT_REQUESTS, type HitRow } from '../sql/rate-windows.ts';
import { Batch } from '../db/batch.ts';
import { DRAW_RUN_BUDGET } from '../sql/run-budget.ts';
import { requestRateLimited } from '../observability/metrics.ts';

/**
 * The POST /runs limit: a sliding 60-second window per API key, kept as 60 one-second buckets so a
 * request costs the same whatever the key's limit (docs/design/rules.md#rate-limit). A request leaves
 * the window 60 s after the start of the second it was counted in. Every request that reaches the
 * limiter counts, whatever its outcome; a 429 does not.
 *
 * On a Postgres server the window is a row per key (`api_key_rate_windows`, src/sql/rate-windows.ts),
 * so every API process on the database enforces one limit; embedded PGlite is one process by construction and keeps the buckets in memory.
 */

export const WINDOW_MS = 60_000;
const BUCKETS = WINDOW_MS / 1000;

export type RateDecision = RateLimitState;

export interface RateLimiter {
  /** Counts the request or throws 429 `rate_limited` (with when to retry). */
  hit(keyId: string, limit: number): Promise<RateDecision>;
  /** Draws a batch's `runs` from the key's run budget (`budget` a minute), all or none, or throws 429 (docs/design/batch-runs.md#run-budget). */
  draw(keyId: string, budget: number, runs: number): Promise<RateDecision>;
}

function refuse(limit: number, oldestMs: number, now: number): never {
  requestRateLimited('runs_per_minute');
  const retry = Math.max(1, Math.ceil((oldestMs + WINDOW_MS - now) / 1000));
  throw new ApiError('rate_limited', `more than ${limit} POST /runs per minute for this API key; retry in ${retry} s`, {
    retryAfterSeconds: retry,
    rateLimit: { limit, remaining: 0, resetSeconds: retry },
  });
}

/** The 429 of a batch its key's run budget cannot hold now (or ever: more runs than the budget). */
function refuseDraw(budget: number, runs: number, counted: number, oldestMs: number | null, now: number): never {
  requestRateLimited('run_budget');
  const retry = runs > budget || oldestMs === null ? 60 : Math.max(1, Math.ceil((oldestMs + WINDOW_MS - now) / 1000));
  const left = Math.max(0, budget - counted);
  const message = `a batch of ${runs} runs does not fit this API key's run budget of ${budget} a minute (${left} left); retry in ${retry} s`;
  throw new ApiError('rate_limited', message, {
    // Its RateLimit-* headers are the request window's (counted-start.ts): the message states the budget.
    retryAfterSeconds: retry,
  });
}

const decision = (limit: number, counted: number, oldestMs: number, now: number): RateDecision => ({
  limit,
  remaining: Math.max(0, limit - counted),
  resetSeconds: Math.max(0, Math.ceil((oldestMs + WINDOW_MS - now) / 1000)),
});

/** The decision a hit row stands for, or the 429 it means. */
export function decide(limit: number, r: HitRow): RateDecision {
  const now = Number(r.now_ms);
  const oldest = Number(r.oldest_ms);
  if (!r.allowed) refuse(limit, oldest, now);
  return decision(limit, Number(r.counted), oldest, now);
}

interface Buckets {
  /** Epoch second of counts[BUCKETS - 1]. */
  second: number;
  counts: Int32Array;
}

export class SlidingWindowLimiter implements RateLimiter {
  readonly #windows = new Map<string, Buckets>();
  /** The run budgets' windows, by key. */
  readonly #runs = new Map<string, Buckets>();

  async hit(keyId: string, limit: number, now = Date.now()): Promise<RateDecision> {
    const w = this.#shifted(keyId, Math.floor(now / 1000));
    let total = 0;
    for (const c of w.counts) total += c;
    if (total >= limit) refuse(limit, oldestMs(w), now);
    w.counts[BUCKETS - 1]++;
    return decision(limit, total + 1, oldestMs(w), now);
  }

  async draw(keyId: string, budget: number, runs: number, now = Date.now()): Promise<RateDecision> {
    const w = this.#shifted(keyId, Math.floor(now / 1000), this.#runs);
    let total = 0;
    for (const c of w.counts) total += c;
    if (total + runs > budget) refuseDraw(budget, runs, total, total > 0 ? oldestMs(w) : null, now);
    w.counts[BUCKETS - 1] += runs;
    return decision(budget, total + runs, oldestMs(w), now);
  }

  /** The key's buckets moved on to `second` (a bucket 60 s old or older has left the window). */
  #shifted(keyId: string, second: number, windows = this.#windows): Buckets {
    let w = windows.get(keyId);
    if (!w) windows.set(keyId, (w = { second, counts: new Int32Array(BUCKETS) }));
    const by = second - w.second;
    if (by > 0) {
      if (by >= BUCKETS) w.counts.fill(0);
      else w.counts.copyWithin(0, by).fill(0, BUCKETS - by);
      w.second = second;
    }
    return w;
  }
}

function oldestMs(w: Buckets): number {
  const i = w.counts.findIndex((c) => c > 0);
  return (w.second - BUCKETS + 1 + i) * 1000;
}

/** The counts that arrive while one is on its way go together as the next statement (src/db/batch.ts), keys in one order. */
const requestCounts = new Batch<{ keyId: string; limit: number }>({
  statement: COUNT_REQUESTS,
  values: (calls) => [calls.map((c) => c.keyId), calls.map((c) => c.limit)],
  orderKey: (call) => call.keyId,
});

export class PostgresWindowLimiter implements RateLimiter {
  readonly #orm: Orm;

  constructor(orm: Orm) {
    this.#orm = orm;
  }

  async hit(keyId: string, limit: number): Promise<RateDecision> {
    const [r] = (await requestCounts.run(outsideTransaction(this.#orm), { keyId, limit })) as unknown as HitRow[];
    return decide(limit, r);
  }

  async draw(keyId: string, budget: number, runs: number): Promise<RateDecision> {
    const [r] = await query<HitRow>(this.#orm.em.fork(), DRAW_RUN_BUDGET, [keyId, budget, runs]);
    const now = r ? Number(r.now_ms) : Date.now();
    if (!r?.allowed) refuseDraw(budget, runs, r ? Number(r.counted) : 0, r?.oldest_ms == null ? null : Number(r.oldest_ms), now);
    return decision(budget, Number(r.counted), Number(r.oldest_ms), now);
  }
}

/** One start request's place in its key's window, counted exactly once (counted-start.ts). */
export class RequestRate {
  /** The decision once counted (undefined while not counted, or when refused). */
  decision: RateDecision | undefined;
  /** Whether the request was counted or refused. */
  settled = false;

  constructor(
    readonly limiter: RateLimiter,
    readonly keyId: string,
    readonly limit: number,
  ) {}

  /** Counts the request unless it was already; throws 429 when the window is full. */
  async count(): Promise<RateDecision | undefined> {
    if (this.settled) return this.decision;
    try {
      this.decision = await this.limiter.hit(this.keyId, this.limit);
    } finally {
      this.settled = true;
    }
    return this.decision;
  }
}
