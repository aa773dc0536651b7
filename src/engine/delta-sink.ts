import type { NewRunEvent } from '../domain/run-steps.ts';
import { fork, type RunsDeps } from '../runs/deps.ts';
import { fencedWrite, publish } from '../runs/fenced-write.ts';

/** Chunks of output buffered before a delta flush, and the longest a chunk waits. */
const DELTA_FLUSH_CHUNKS = 20;
const DELTA_FLUSH_MS = 50;

/** Thrown into the activity when the run ended while the step streamed. */
export class RunNotWritable extends Error {
  constructor() {
    super('the run is no longer running');
    this.name = 'RunNotWritable';
  }
}

/**
 * Buffers a step's output chunks and writes them as `node.output.delta` events in small fenced
 * transactions (every DELTA_FLUSH_MS or DELTA_FLUSH_CHUNKS chunks), one flush at a time, in order.
 * `skip` characters already published by an earlier attempt of the step are not published again.
 */
export class DeltaSink {
  #buffer: string[] = [];
  #chain: Promise<void> = Promise.resolve();
  #timer: NodeJS.Timeout | undefined;
  /** The first failed flush: every later push and the drain rethrow it. */
  #failure: { error: unknown } | null = null;
  #skip: number;

  constructor(
    private readonly deps: RunsDeps,
    private readonly runId: string,
    private readonly nodeId: string,
    skip: number,
  ) {
    this.#skip = skip;
  }

  push = async (text: string): Promise<void> => {
    if (this.#failure) throw this.#failure.error;
    if (this.#skip > 0) {
      const cut = Math.min(this.#skip, text.length);
      this.#skip -= cut;
      text = text.slice(cut);
    }
    if (!text) return;
    this.#buffer.push(text);
    if (this.#buffer.length >= DELTA_FLUSH_CHUNKS) await this.flush();
    else this.#timer ??= setTimeout(() => void this.flush().catch(() => undefined), DELTA_FLUSH_MS);
  };

  flush(): Promise<void> {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    const batch = this.#buffer.splice(0);
    if (batch.length === 0) return this.#chain;
    this.#chain = this.#chain.then(async () => {
      if (this.#failure) return;
      try {
        const written = await fencedWrite(fork(this.deps), this.runId, {
          statuses: ['running', 'suspended'],
          absentResults: [this.nodeId],
          events: batch.map((text) => ({ type: 'node.output.delta', nodeId: this.nodeId, data: { text } })),
        });
        if (written === null) throw new RunNotWritable();
        publish(this.deps, this.runId, written);
      } catch (error) {
        this.#failure = { error };
        throw error;
      }
    });
    return this.#chain;
  }

  /** Waits for flushes in progress and hands back what is still buffered (written with the result). */
  async drain(): Promise<NewRunEvent[]> {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#chain.catch(() => undefined);
    if (this.#failure) throw this.#failure.error;
    return this.#buffer.splice(0).map((text) => ({ type: 'node.output.delta', nodeId: this.nodeId, data: { text } }));
  }

  /** Stops flushing (abort): waits for a flush in progress, drops the rest. */
  async close(): Promise<void> {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#buffer = [];
    await this.#chain.catch(() => undefined);
  }
}
