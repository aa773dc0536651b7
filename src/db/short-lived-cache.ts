/**
 * Rarely changing rows that every request reads (an API key, the service pricing), kept by this process
 * for at most `ttlMs` so that requests do not each go to Postgres for them. A value is never used once
 * `ttlMs` has passed since the read that gave it began, so a change committed elsewhere reaches this
 * process within `ttlMs`. Two rules keep those reads off the requests' path:
 *
 * - One read per key at a time: callers arriving while it runs share it. Otherwise every request in
 *   flight when a value expires sends its own read, and they all queue on the connection pool together.
 * - Read ahead: a caller given a value older than half of `ttlMs` starts the next read in the
 *   background and goes on with the value it has, so under steady traffic nobody waits for a read.
 *
 * A read that finds nothing (null) keeps nothing, so unknown keys cannot fill the map. `drop` forgets
 * a key (or all), including what a read already in flight would have kept.
 */
export class ShortLivedCache<V> {
  readonly #kept = new Map<string, { at: number; value: V }>();
  readonly #reading = new Map<string, { at: number; value: Promise<V | null> }>();
  /** Bumped by `drop`: a read begun before it keeps nothing. */
  #generation = 0;

  constructor(
    readonly ttlMs: number,
    readonly max = 10_000,
    readonly now: () => number = Date.now,
  ) {}

  /**
   * The value of `key`, kept or read by `read`. Callers share the read, so it must not use any caller's
   * transaction.
   */
  get(key: string, read: () => Promise<V | null>): Promise<V | null> {
    const kept = this.#kept.get(key);
    if (kept) {
      const age = this.now() - kept.at;
      if (age < this.ttlMs) {
        if (age >= this.ttlMs / 2 && !this.#reading.has(key)) {
          // A failed read ahead changes nothing: the value expires and the next caller's read reports.
          this.#read(key, read).catch(() => undefined);
        }
        return Promise.resolve(kept.value);
      }
    }
    const reading = this.#reading.get(key);
    // A read begun more than ttlMs ago is not joined: what it finds could be older than a kept value may be.
    if (reading && this.now() - reading.at < this.ttlMs) return reading.value;
    return this.#read(key, read);
  }

  /** The value of `key` if one is kept and its time is not up; starts no read. */
  peek(key: string): V | undefined {
    const kept = this.#kept.get(key);
    return kept && this.now() - kept.at < this.ttlMs ? kept.value : undefined;
  }

  /** Forgets `key` (every key when omitted); reads in flight keep nothing and later callers read again. */
  drop(key?: string): void {
    this.#generation++;
    if (key === undefined) {
      this.#kept.clear();
      this.#reading.clear();
    } else {
      this.#kept.delete(key);
      this.#reading.delete(key);
    }
  }

  #read(key: string, read: () => Promise<V | null>): Promise<V | null> {
    const at = this.now();
    const generation = this.#generation;
    const value = read()
      .then((value) => {
        // Neither a read begun before a drop nor one older than the kept value's changes anything.
        const kept = this.#kept.get(key);
        if (generation === this.#generation && !(kept && kept.at > at)) {
          if (value === null) this.#kept.delete(key);
          else {
            if (this.#kept.size >= this.max && !this.#kept.has(key)) this.#kept.clear();
            this.#kept.set(key, { at, value });
          }
        }
        return value;
      })
      .finally(() => {
        if (this.#reading.get(key) === reading) this.#reading.delete(key);
      });
    const reading = { at, value };
    this.#reading.set(key, reading);
    return value;
  }
}
