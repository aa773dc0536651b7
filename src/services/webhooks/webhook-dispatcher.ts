import { deliverDueWebhooks, WEBHOOK_BACKOFF_MS, WEBHOOK_LEASE_MS, WEBHOOK_TIMEOUT_MS, type WebhookDeps } from './deliver-webhooks.ts';

/**
 * Background sender for the webhook outbox. It runs a delivery batch when told that a run ended
 * (`notify()`, called after the terminal transaction commits), when a retry it recorded is due, and on
 * a slow timer, which picks up rows left by another or an earlier process (the outbox is in Postgres,
 * so pending deliveries survive a restart): idle, that timer is its only statement. Nothing here
 * blocks the caller: `notify()` only sets a flag.
 *
 * Batches may overlap (up to `maxConcurrentBatches`), so one slow receiver does not hold up the others;
 * `FOR UPDATE SKIP LOCKED` plus the claim lease keep overlapping batches from sending a row twice.
 */

export interface WebhookDispatcherOptions {
  /**
   * Timer period: how often due rows are looked for without a notify or a retry of this process due:
   * how late a row another process left behind (it crashed, its claim lease ran out) may be sent. Default 60 s.
   */
  intervalMs?: number;
  /** Rows claimed per batch. Default 16. */
  batchSize?: number;
  /** Batches in flight at once. Default 4. */
  maxConcurrentBatches?: number;
  /** Retry schedule. Default: 5 s, 30 s, 2 min, 10 min, 1 h, 6 h (docs/design/webhooks.md). */
  backoffMs?: readonly number[];
  /** Per-attempt timeout. Default 10 s. */
  timeoutMs?: number;
  /** Claim lease. Default 60 s. */
  leaseMs?: number;
  /**
   * How long `stop()` waits for sends in flight before aborting them (aborted rows keep their lease
   * and are sent again later). Default: the attempt timeout plus 2 s.
   */
  stopTimeoutMs?: number;
}

type Resolved = Required<WebhookDispatcherOptions>;

export class WebhookDispatcher {
  readonly #deps: WebhookDeps;
  readonly #opts: Resolved;
  #running = false;
  #timer: NodeJS.Timeout | undefined;
  #immediate: NodeJS.Immediate | undefined;
  /** Due times of the retries this process recorded; the timer is armed for the earliest. */
  #retries: number[] = [];
  #retryTimer: NodeJS.Timeout | undefined;
  #retryAt = Infinity;
  /** Work may be due that no running batch will see. */
  #dirty = false;
  readonly #inFlight = new Set<Promise<void>>();
  #abort = new AbortController();

  constructor(deps: WebhookDeps, opts: WebhookDispatcherOptions = {}) {
    this.#deps = deps;
    const timeoutMs = opts.timeoutMs ?? WEBHOOK_TIMEOUT_MS;
    this.#opts = {
      intervalMs: opts.intervalMs ?? 60_000,
      batchSize: opts.batchSize ?? 16,
      maxConcurrentBatches: opts.maxConcurrentBatches ?? 4,
      backoffMs: opts.backoffMs ?? WEBHOOK_BACKOFF_MS,
      timeoutMs,
      leaseMs: opts.leaseMs ?? Math.max(WEBHOOK_LEASE_MS, timeoutMs * 3),
      stopTimeoutMs: opts.stopTimeoutMs ?? timeoutMs + 2000,
    };
  }

  get running(): boolean {
    return this.#running;
  }

  /** Starts the loop; the first batch runs at once (rows left by an earlier process). Idempotent. */
  start(): this {
    if (this.#running) return this;
    this.#running = true;
    this.#abort = new AbortController();
    this.#armTimer();
    this.notify();
    return this;
  }

  /** There may be new due deliveries (a run just became terminal). Cheap, synchronous, never throws. */
  notify(): void {
    if (!this.#running) return;
    this.#dirty = true;
    // Coalesce a burst of notifications (many runs ending in one tick) into one batch.
    this.#immediate ??= setImmediate(() => {
      this.#immediate = undefined;
      this.#pump();
    });
  }

  /**
   * Stops taking new work and waits for the batches in flight, at most `stopTimeoutMs`; then aborts what
   * is left (those rows stay leased and are retried after the lease). Safe to call twice.
   */
  async stop(): Promise<void> {
    this.#running = false;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    clearTimeout(this.#retryTimer);
    this.#retryTimer = undefined;
    this.#retryAt = Infinity;
    this.#retries = [];
    if (this.#immediate) clearImmediate(this.#immediate);
    this.#immediate = undefined;
    this.#dirty = false;
    if (this.#inFlight.size === 0) return;
    const settled = await waitAll(this.#inFlight, this.#opts.stopTimeoutMs);
    if (settled) return;
    this.#abort.abort();
    await waitAll(this.#inFlight, 2000);
  }

  #armTimer(): void {
    if (!this.#running) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.notify();
      this.#armTimer();
    }, this.#opts.intervalMs);
    this.#timer.unref();
  }

  /** A retry recorded here is due at `at`: a batch then (the slow timer would find it late). */
  #retryDue(at: number): void {
    if (!this.#running) return;
    this.#retries.push(at);
    this.#armRetry();
  }

  /** The timer for the earliest retry recorded here; the ones it finds due are dropped (one batch sends them all). */
  #armRetry(): void {
    const now = Date.now();
    this.#retries = this.#retries.filter((at) => at > now);
    const next = Math.min(...this.#retries);
    if (next === Infinity || next >= this.#retryAt) return;
    clearTimeout(this.#retryTimer);
    this.#retryAt = next;
    this.#retryTimer = setTimeout(
      () => {
        this.#retryTimer = undefined;
        this.#retryAt = Infinity;
        this.notify();
        this.#armRetry();
      },
      next - now + 5,
    );
    this.#retryTimer.unref();
  }

  #pump(): void {
    while (this.#running && this.#dirty && this.#inFlight.size < this.#opts.maxConcurrentBatches) {
      this.#dirty = false;
      const batch = this.#runBatch();
      this.#inFlight.add(batch);
      void batch.finally(() => {
        this.#inFlight.delete(batch);
        this.#pump();
      });
    }
  }

  async #runBatch(): Promise<void> {
    try {
      const n = await deliverDueWebhooks(this.#deps, {
        limit: this.#opts.batchSize,
        backoffMs: this.#opts.backoffMs,
        timeoutMs: this.#opts.timeoutMs,
        leaseMs: this.#opts.leaseMs,
        signal: this.#abort.signal,
        onRetry: (at) => this.#retryDue(at),
      });
      // A full batch means more may be due right now.
      if (n >= this.#opts.batchSize) this.#dirty = true;
    } catch (err) {
      // Database trouble: the timer tries again; claimed rows are protected by their lease.
      if (this.#running) this.#deps.log.error({ err: err instanceof Error ? err.message : String(err) }, 'webhook dispatcher batch failed');
    }
  }
}

/** Creates and starts a dispatcher; call `notify()` after each terminal transition commits, `stop()` at shutdown. */
export function startWebhookDispatcher(deps: WebhookDeps, opts?: WebhookDispatcherOptions): WebhookDispatcher {
  return new WebhookDispatcher(deps, opts).start();
}

async function waitAll(set: Set<Promise<void>>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([Promise.allSettled([...set]).then(() => true as const), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
