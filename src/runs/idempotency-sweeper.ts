import type { Orm } from '../db/orm.ts';
import { query } from '../db/statement.ts';
import { uuidAtTime } from '../domain/ids.ts';
import type { Logger } from '../logger.ts';
import { idempotencyRecordsDeleted } from '../observability/metrics.ts';
import { DELETE_EXPIRED_IDEMPOTENCY_RECORDS, IDEMPOTENCY_RECORD_HOURS } from '../sql/idempotency-records.ts';

const HOUR_MS = 3_600_000;
const NIL = '00000000-0000-0000-0000-000000000000';
const MAX = 'ffffffff-ffff-ffff-ffff-ffffffffffff';

export interface IdempotencySweeperOptions {
  /** Time between sweeps. Default 10 min (records are kept a day; an idle process's few statements: docs/operations.md#idle). */
  intervalMs?: number;
  /** Records looked at per transaction. Default 500. */
  batch?: number;
  /** Batches of a sweep at most, over time-ordered ids (a backlog is left to the next sweeps). Default 1 000. */
  maxBatches?: number;
  /** Batches of a sweep over the older random ids, from where the last sweep left off. Default 20. */
  legacyBatches?: number;
}

/**
 * Deletes expired idempotency records, so that the table holds about a day of keys however long the
 * service runs (docs/round-trips.md#expired-idempotency-records). Every API process sweeps, every
 * ten minutes and once shortly after it starts; sweeps of several processes split the work (their batches
 * skip each other's rows). Deleting an expired record changes no answer: the acceptance treats an
 * expired record as absent.
 *
 * Two ranges of record ids are swept. Ids written since records became time-ordered sort by the
 * millisecond they were made, so the expired ones lie below the id of "24 hours ago": a sweep reads that
 * range from its start, and finds little there but what it deletes. Random ids written before that are
 * almost all above the id of "tomorrow", which no clock writes yet, mixed with live ones: a sweep reads a
 * few batches of that range, from where the previous sweep stopped, and starts it over at its end. The
 * few random ids between the two bounds are found once the lower bound has passed them.
 */
export class IdempotencySweeper {
  readonly #intervalMs: number;
  readonly #batch: number;
  readonly #maxBatches: number;
  readonly #legacyBatches: number;
  #timer: NodeJS.Timeout | undefined;
  /** Bumped by start and stop: a sweep of an earlier start schedules no next one. */
  #generation = 0;
  #stopping = false;
  #sweeping: Promise<number> | null = null;
  /** Where the next sweep of the random ids starts (null: at the range's start). */
  #legacyAfter: string | null = null;

  constructor(
    private readonly deps: { orm: Orm; log: Pick<Logger, 'warn'> },
    opts: IdempotencySweeperOptions = {},
  ) {
    this.#intervalMs = opts.intervalMs ?? 600_000;
    this.#batch = opts.batch ?? 500;
    this.#maxBatches = opts.maxBatches ?? 1_000;
    this.#legacyBatches = opts.legacyBatches ?? 20;
  }

  start(): void {
    if (this.#timer) return;
    this.#stopping = false;
    const generation = ++this.#generation;
    const tick = (ms: number) => {
      this.#timer = setTimeout(() => {
        void this.sweep()
          .catch((err) => this.deps.log.warn({ err }, 'could not delete expired idempotency records (the next sweep tries again)'))
          .finally(() => {
            if (generation === this.#generation) tick(this.#intervalMs * (0.9 + Math.random() * 0.2));
          });
      }, ms);
      this.#timer.unref();
    };
    // The first sweep shortly after start-up; the spread keeps processes started together apart.
    tick(1_000 + Math.random() * 2_000);
  }

  /** No next sweep; a sweep under way ends after its current batch. */
  async stop(): Promise<void> {
    this.#generation++;
    this.#stopping = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#sweeping?.catch(() => undefined);
  }

  /** A sweep that starts now, or after the one under way: how many records it deleted. `now`: this process's clock. */
  sweep(now?: number): Promise<number> {
    const before = this.#sweeping?.catch(() => 0) ?? Promise.resolve(0);
    const next: Promise<number> = before
      .then(() => this.#sweep(now ?? Date.now()))
      .finally(() => {
        if (this.#sweeping === next) this.#sweeping = null;
      });
    this.#sweeping = next;
    return next;
  }

  async #sweep(now: number): Promise<number> {
    const expiredBelow = uuidAtTime(now - IDEMPOTENCY_RECORD_HOURS * HOUR_MS);
    const futureAbove = uuidAtTime(now + 24 * HOUR_MS);
    let deleted = (await this.#range(NIL, expiredBelow, this.#maxBatches)).deleted;
    const from = this.#legacyAfter !== null && this.#legacyAfter > futureAbove ? this.#legacyAfter : futureAbove;
    const legacy = await this.#range(from, MAX, this.#legacyBatches);
    this.#legacyAfter = legacy.done ? null : legacy.after;
    deleted += legacy.deleted;
    return deleted;
  }

  /** Batches over ids strictly between `after` and `before`, until the range ends (`done`) or `batches` ran. */
  async #range(after: string, before: string, batches: number): Promise<{ deleted: number; after: string; done: boolean }> {
    let deleted = 0;
    for (let i = 0; i < batches && !this.#stopping; i++) {
      const [row] = await query<{ deleted: number; examined: number; last: string | null }>(this.deps.orm.em.fork(), DELETE_EXPIRED_IDEMPOTENCY_RECORDS, [
        after,
        before,
        this.#batch,
      ]);
      const n = Number(row?.deleted ?? 0);
      deleted += n;
      idempotencyRecordsDeleted(n);
      if (Number(row?.examined ?? 0) < this.#batch || !row?.last) return { deleted, after, done: true };
      after = row.last;
    }
    return { deleted, after, done: false };
  }
}
