import { randomUUID } from 'node:crypto';
import { ApiError } from '../domain/errors.ts';
import type { Orm } from '../db/orm.ts';
import type { Logger } from '../logger.ts';
import { query } from '../db/statement.ts';
import { ACQUIRE_STREAM_SLOT, DROP_STREAM_SLOT_LEASES, RELEASE_STREAM_SLOT, RENEW_STREAM_SLOT_LEASES } from '../sql/stream-slots.ts';
import { requestRateLimited } from '../observability/metrics.ts';

/**
 * Open-stream limits (MAX_STREAMS_PER_KEY): how many live streams one holder (an API key's SSE streams,
 * the internal token's GraphQL subscriptions) may keep open across the deployment. One over the limit
 * is refused with 429 `too_many_streams` before the stream starts (docs/design/rules.md, "Open
 * streams"). `rate_limited` stays reserved for POST /runs.
 *
 * On a Postgres server the counts are shared by every process (PostgresStreamSlots); embedded PGlite is
 * one process by construction and counts in memory.
 */

export interface StreamSlots {
  /** Takes a slot or throws 429 `too_many_streams`. The caller gives it back with `release`, once. */
  acquire(holder: string): Promise<void>;
  release(holder: string): void;
  /** Gives back every slot this process holds (shutdown). */
  close(): Promise<void>;
}

/** Holder of an API key's REST streams. */
export const keyHolder = (apiKeyId: string) => `key:${apiKeyId}`;

function refuse(limit: number): never {
  requestRateLimited('open_streams');
  throw new ApiError('too_many_streams', `this API key already has ${limit} open streams; close one before opening another`, { retryAfterSeconds: 5 });
}

/** MAX_STREAMS_PER_KEY=0: no limit. */
export class UnlimitedStreamSlots implements StreamSlots {
  async acquire(): Promise<void> {}
  release(): void {}
  async close(): Promise<void> {}
}

export class MemoryStreamSlots implements StreamSlots {
  readonly #open = new Map<string, number>();
  constructor(readonly limit: number) {}

  async acquire(holder: string): Promise<void> {
    const n = this.#open.get(holder) ?? 0;
    if (n >= this.limit) refuse(this.limit);
    this.#open.set(holder, n + 1);
  }

  release(holder: string): void {
    const left = (this.#open.get(holder) ?? 1) - 1;
    if (left > 0) this.#open.set(holder, left);
    else this.#open.delete(holder);
  }

  async close(): Promise<void> {
    this.#open.clear();
  }
}

/**
 * Counts in Postgres (src/sql/stream-slots.ts): a total per holder (`stream_slot_totals`, the row every
 * process updates, so the check and the count are one atomic step under its row lock) and what each
 * process holds of it (`stream_slot_leases`, with a lease this process renews). A process that dies
 * without giving its slots back (kill -9) stops renewing; any process then subtracts its expired
 * leases from the totals.
 */
export class PostgresStreamSlots implements StreamSlots {
  readonly processId = `streams-${randomUUID()}`;
  readonly #timer: NodeJS.Timeout;
  /** Slots this process holds: with none, there is no lease to renew (an idle process sends nothing). */
  #held = 0;

  constructor(
    private readonly orm: Orm,
    readonly limit: number,
    private readonly log: Logger,
    private readonly leaseSeconds = 30,
  ) {
    this.#timer = setInterval(() => void this.#renew(), (leaseSeconds * 1000) / 3);
    this.#timer.unref();
  }

  async acquire(holder: string): Promise<void> {
    let rows = await query(this.#em(), ACQUIRE_STREAM_SLOT, [holder, this.limit, this.processId, this.leaseSeconds]);
    if (rows.length === 0) {
      // Full: slots of processes that died (their leases expired) are given back first, then one more try.
      await query(this.#em(), DROP_STREAM_SLOT_LEASES, [null]);
      rows = await query(this.#em(), ACQUIRE_STREAM_SLOT, [holder, this.limit, this.processId, this.leaseSeconds]);
    }
    if (rows.length === 0) refuse(this.limit);
    this.#held++;
  }

  release(holder: string): void {
    this.#held--;
    query(this.#em(), RELEASE_STREAM_SLOT, [holder, this.processId]).catch((err) =>
      this.log.warn({ err }, 'could not give back a stream slot (its lease expires instead)'),
    );
  }

  async close(): Promise<void> {
    clearInterval(this.#timer);
    await query(this.#em(), DROP_STREAM_SLOT_LEASES, [this.processId]).catch((err) =>
      this.log.warn({ err }, 'could not give back the stream slots (their leases expire instead)'),
    );
  }

  async #renew(): Promise<void> {
    if (this.#held === 0) return;
    try {
      const em = this.#em();
      await query(em, RENEW_STREAM_SLOT_LEASES, [this.leaseSeconds, this.processId]);
      await query(em, DROP_STREAM_SLOT_LEASES, [null]);
    } catch (err) {
      this.log.warn({ err }, 'could not renew the stream slot leases');
    }
  }

  #em() {
    return this.orm.em.fork();
  }
}

/** The slots a service instance uses: in Postgres on a server, in memory on PGlite; none when limit is 0. */
export function createStreamSlots(opts: { orm: Orm; limit: number; shared: boolean; log: Logger }): StreamSlots {
  if (opts.limit === 0) return new UnlimitedStreamSlots();
  return opts.shared ? new PostgresStreamSlots(opts.orm, opts.limit, opts.log) : new MemoryStreamSlots(opts.limit);
}
