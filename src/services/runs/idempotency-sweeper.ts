import type { Orm } from '../../db/orm.ts';
import { query } from '../../db/statement.ts';
import { uuidAtTime } from '../../domain/ids.ts';
import type { Logger } from '../../logger.ts';
import { idempotencyRecordsDeleted } from '../../observability/metrics.ts';
import { DELETE_EXPIRED_IDEMPOTENCY_RECORDS, IDEMPOTENCY_RECORD_HOURS } from '../../sql/idempotency-records.ts';

const HOUR_MS = 3_600_000;
const NIL = '00000000-0000-0000-0000-000000000000';
const MAX = 'ffffffff-ffff-ffff-ffff-ffffffffffff';

export interface IdempotencySweeperOptions {
  /** Time between sweeps. Default 60 s. */
  intervalMs?: number;
  /** Records deleted per transaction. Default 500. */
  batch?: number;
}

/**
 * Deletes expired idempotency records, so that the table holds about a day of keys however long the
 * service runs (docs/architecture.md#expired-idempotency-records). Every API process sweeps, every
 * minute and once shortly after it starts; sweeps of several processes split the work (their batches
 * skip each other's rows). Deleting an expired record changes no answer: the acceptance treats an
 * expired record as absent.
 *
 * Two ranges of record ids are swept. Ids written since records became time-ordered sort by the
 * millisecond they were made, so the expired ones lie below the id of "24 hours ago". Random ids
 * written before that are almost all above the id of "tomorrow", which no clock writes yet; the few
 * that fall between the two bounds are found once the lower bound has passed them.
 */
export class IdempotencySweeper {
  readonly #intervalMs: number;
  readonly #batch: number;
  #timer: NodeJS.Timeout | undefined;
  /** Bumped by start and stop: a sweep of an earlier start schedules no next one. */
  #generation = 0;
  #sweeping: Promise<number> | null = null;

  constructor(
    private readonly deps: { orm: Orm; log: Pick<Logger, 'warn'> },
    opts: IdempotencySweeperOptions = {},
  ) {
    this.#intervalMs = opts.intervalMs ?? 60_000;
    this.#batch = opts.batch ?? 500;
  }

  start(): void {
    if (this.#timer) return;
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

  async stop(): Promise<void> {
    this.#generation++;
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
    return (await this.#range(NIL, expiredBelow)) + (await this.#range(futureAbove, MAX));
  }

  /** Batches over ids strictly between `after` and `before`, until one comes back short. */
  async #range(after: string, before: string): Promise<number> {
    let total = 0;
    for (;;) {
      const [row] = await query<{ deleted: number; last: string | null }>(this.deps.orm.em.fork(), DELETE_EXPIRED_IDEMPOTENCY_RECORDS, [after, before, this.#batch]);
      const deleted = Number(row?.deleted ?? 0);
      total += deleted;
      idempotencyRecordsDeleted(deleted);
      if (deleted < this.#batch || !row?.last) return total;
      after = row.last;
    }
  }
}
