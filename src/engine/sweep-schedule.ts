/**
 * When an engine runs its periodic work (docs/operations.md#idle). Instead of running it on a fixed
 * beat, a check reads in one statement whether there is any (the embedded engine: SWEEP_DUE in
 * src/sql/run-leases.ts; the Temporal engine: TEMPORAL_RUNS_LIVE in src/sql/temporal-runs.ts):
 *
 * - runs queued, or something in flight due now: the work runs, and the next check comes `busyMs`
 *   later (the beat the engine kept before, while there is work);
 * - otherwise the next check is at the earliest due time it saw (a deadline, a lease of a crashed
 *   process running out, a timer, a credentials wait running out), or `idleMs` later at the latest:
 *   that fallback bounds what no due time announces (a run another process left queued or unleased).
 *
 * `poke()` (a run accepted or ended here, credentials, a cancel, another process's run activity) brings
 * the next check to at most `busyMs` away, so what starts is watched at the busy pace.
 */

export interface SweepScheduleOptions {
  /** What the sweep would find: runs queued; the earliest due time (epoch ms) of a run in flight. */
  check: () => Promise<{ queued: boolean; dueAt: number | null }>;
  sweep: () => Promise<void>;
  busyMs: number;
  idleMs: number;
  failed: (err: unknown) => void;
}

const MAX_TIMEOUT_MS = 2 ** 31 - 1;

export class SweepSchedule {
  readonly #o: SweepScheduleOptions;
  #timer: NodeJS.Timeout | undefined;
  /** When the armed timer fires (epoch ms). */
  #at = Infinity;
  #running = false;
  #inFlight: Promise<void> | null = null;
  /** Poked while a check was under way (it may have read the database before what the poke says). */
  #poked = false;

  constructor(o: SweepScheduleOptions) {
    this.#o = o;
  }

  /** The check (and sweep) under way, or null: stop waits for it. */
  get inFlight(): Promise<void> | null {
    return this.#inFlight;
  }

  /** The first check `busyMs` from now (start-up has just swept). */
  start(): void {
    this.#running = true;
    this.#arm(Date.now() + this.#o.busyMs);
  }

  stop(): void {
    this.#running = false;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#at = Infinity;
  }

  /** Something happened here that may be due soon: check within `busyMs`. */
  poke(): void {
    if (this.#inFlight) this.#poked = true;
    else this.#arm(Date.now() + this.#o.busyMs);
  }

  /** Arms the timer for `at`, unless it fires sooner already. */
  #arm(at: number): void {
    if (!this.#running || at >= this.#at) return;
    clearTimeout(this.#timer);
    this.#at = at;
    this.#timer = setTimeout(() => this.#fire(), Math.min(MAX_TIMEOUT_MS, Math.max(0, at - Date.now())));
    this.#timer.unref();
  }

  #fire(): void {
    this.#timer = undefined;
    this.#at = Infinity;
    this.#inFlight = this.#round().finally(() => {
      this.#inFlight = null;
    });
  }

  async #round(): Promise<void> {
    this.#poked = false;
    let next = Date.now() + this.#o.idleMs;
    try {
      const { queued, dueAt } = await this.#o.check();
      if (queued || (dueAt !== null && dueAt <= Date.now())) {
        await this.#o.sweep();
        next = Date.now() + this.#o.busyMs;
      } else if (dueAt !== null) {
        // A little after the due time: the database's clock decides, and a late check costs one more.
        next = Math.min(next, Math.max(dueAt + 5, Date.now() + this.#o.busyMs));
      }
    } catch (err) {
      this.#o.failed(err);
      next = Date.now() + this.#o.busyMs;
    }
    if (this.#poked) next = Math.min(next, Date.now() + this.#o.busyMs);
    this.#arm(next);
  }
}
