/** A stream the ticker keeps alive: `heartbeat()` writes the idle comment. */
export interface Heartbeating {
  heartbeat(): void;
  /** The server shuts down: end the stream, telling the client to reconnect after `retryMs` (to another process). */
  endForShutdown?(retryMs: number): void;
}

/**
 * Idle heartbeats of every open stream from one timer, instead of a `setInterval` per stream (a Timeout
 * object, its closure and a timer-list entry each, for 10 000 idle streams). A stream is due one period
 * after its last write, heartbeat included, as with a per-stream interval refreshed on every write.
 * The map keeps the streams in the order of their last write (a write moves its stream to the end), so
 * the due ones are at its front and the timer is armed for the oldest.
 */
export class HeartbeatTicker {
  /** Stream → time of its last write (performance.now()), oldest first. */
  readonly #lastWrite = new Map<Heartbeating, number>();
  #timer: NodeJS.Timeout | null = null;

  constructor(readonly periodMs: number) {}

  /** Records a write on `stream` (and starts tracking it): its next heartbeat is one period from now. */
  touch(stream: Heartbeating): void {
    this.#lastWrite.delete(stream);
    this.#lastWrite.set(stream, performance.now());
    if (!this.#timer) this.#arm(this.periodMs);
  }

  /** Stops tracking a closed stream. */
  drop(stream: Heartbeating): void {
    this.#lastWrite.delete(stream);
    if (this.#lastWrite.size === 0 && this.#timer) {
      clearTimeout(this.#timer);
      this.#timer = null;
    }
  }

  /** Shutdown: every open stream ends with a `retry:` hint. */
  endAll(retryMs: number): void {
    for (const stream of [...this.#lastWrite.keys()]) stream.endForShutdown?.(retryMs);
  }

  get size(): number {
    return this.#lastWrite.size;
  }

  #arm(delayMs: number): void {
    // At least 1 ms: the timer may fire a little before performance.now() says the period is over.
    this.#timer = setTimeout(() => this.#tick(), Math.max(1, Math.ceil(delayMs)));
    this.#timer.unref();
  }

  #tick(): void {
    this.#timer = null;
    const now = performance.now();
    const due: Heartbeating[] = [];
    for (const [stream, at] of this.#lastWrite) {
      if (now - at < this.periodMs) break;
      due.push(stream);
    }
    for (const stream of due) {
      this.#lastWrite.delete(stream);
      this.#lastWrite.set(stream, now);
    }
    for (const stream of due) stream.heartbeat();
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    const oldest = this.#lastWrite.values().next();
    if (!oldest.done) this.#arm(oldest.value + this.periodMs - now);
  }
}
