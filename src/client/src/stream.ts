import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { ApiError } from './errors.ts';
import { sleep } from './retry.ts';
import { isTerminal, TERMINAL_EVENT_TYPES, type Run, type RunEvent } from './types.ts';

export interface StreamOptions {
  /** Start after this sequence (a resumed follower); `outputs` then holds only the text after it. Default 0. */
  afterSequence?: number;
  /** Aborting stops following quietly (the iteration ends); the run is not affected. */
  signal?: AbortSignal;
  /** Consecutive connection attempts that deliver nothing new before the stream gives up. Default 8. */
  maxReconnects?: number;
  /**
   * A connection silent for this long is taken as dead and reopened. The server sends a heartbeat
   * comment every 15 s while idle (SSE_HEARTBEAT_MS), so the default, 45 s, allows two to be lost.
   */
  idleTimeoutMs?: number;
}

export type RunStreamItem =
  /** The Run as it was when a connection opened (every connection starts with one). */
  | { type: 'snapshot'; run: Run; connection: number }
  /** A run event, each exactly once in sequence order; `output` is the node's text rebuilt so far. */
  | { type: 'event'; event: RunEvent; output: string | null }
  /** The connection dropped before the run's terminal event; the next one resumes after `after`. */
  | { type: 'reconnecting'; attempt: number; after: number; error: unknown };

/** What the stream needs from the client (WorkflowRunClient implements it). */
export interface StreamSource {
  openStream(runId: string, after: number, signal: AbortSignal): Promise<ReadableStream<Uint8Array>>;
  listRunEvents(runId: string, opts: { afterSequence?: number; signal?: AbortSignal }): Promise<RunEvent[]>;
  backoff(attempt: number): number;
}

const RETRYABLE = new Set([429, 500, 502, 503, 504]);

/**
 * A run's SSE stream (GET /runs/{id}/stream) that survives disconnects. Every connection resumes with
 * `Last-Event-ID` = the last sequence delivered, and an event at or below it is dropped, so nothing is
 * repeated; the iteration ends only with the run's terminal event, so nothing is skipped. When a
 * (re)connection finds the run already terminal, the server sends the snapshot and closes: the events
 * still missing are then read from GET /runs/{id}/events after the same cursor. `outputs` concatenates
 * each node's `node.output.delta` texts in sequence order, which reproduces the node's output.
 */
export class RunStream implements AsyncIterable<RunStreamItem> {
  /** The newest sequence delivered. */
  lastSequence: number;
  /** The latest snapshot (the Run at the last connect). */
  snapshot: Run | null = null;
  /** Each node's output text, rebuilt from its deltas. */
  readonly outputs = new Map<string, string>();
  /** Connections opened so far. */
  connections = 0;
  /** The terminal event, once delivered. */
  terminal: RunEvent | null = null;

  constructor(
    private readonly client: StreamSource,
    readonly runId: string,
    private readonly opts: StreamOptions = {},
  ) {
    this.lastSequence = opts.afterSequence ?? 0;
  }

  [Symbol.asyncIterator](): AsyncIterator<RunStreamItem> {
    return this.#iterate();
  }

  /** Follows to the end and returns the events delivered. */
  async toEnd(): Promise<RunEvent[]> {
    const events: RunEvent[] = [];
    for await (const item of this) if (item.type === 'event') events.push(item.event);
    return events;
  }

  #accept(event: RunEvent): RunStreamItem | null {
    if (event.sequence <= this.lastSequence) return null;
    this.lastSequence = event.sequence;
    const node = event.nodeId;
    if (event.type === 'node.output.delta' && node && typeof event.data.text === 'string') {
      this.outputs.set(node, (this.outputs.get(node) ?? '') + event.data.text);
    }
    if (TERMINAL_EVENT_TYPES.includes(event.type)) this.terminal = event;
    return { type: 'event', event, output: node ? (this.outputs.get(node) ?? null) : null };
  }

  async *#iterate(): AsyncGenerator<RunStreamItem> {
    const user = this.opts.signal;
    const maxReconnects = this.opts.maxReconnects ?? 8;
    const idleMs = this.opts.idleTimeoutMs ?? 45_000;
    let failures = 0;
    while (!this.terminal) {
      if (user?.aborted) return;
      const conn = new AbortController();
      const stop = () => conn.abort(user?.reason);
      user?.addEventListener('abort', stop, { once: true });
      let idle: ReturnType<typeof setTimeout> | undefined;
      const touch = () => {
        clearTimeout(idle);
        idle = setTimeout(() => conn.abort(new Error(`no data for ${idleMs} ms`)), idleMs);
      };
      let error: unknown;
      let progressed = false;
      try {
        touch();
        const body = await this.client.openStream(this.runId, this.lastSequence, conn.signal);
        this.connections++;
        const messages: EventSourceMessage[] = [];
        const parser = createParser({ onEvent: (m) => messages.push(m) });
        const reader = body.getReader();
        // An abort (Ctrl-C, the idle timer) must end a read that waits on a silent connection: on some
        // Node versions aborting the request leaves that read pending, so the reader is cancelled too.
        conn.signal.addEventListener('abort', () => void reader.cancel(conn.signal.reason).catch(() => undefined), { once: true });
        const decoder = new TextDecoder();
        let terminalAtConnect = false;
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          touch();
          parser.feed(decoder.decode(value, { stream: true }));
          while (messages.length > 0) {
            const m = messages.shift()!;
            if (m.event === 'snapshot') {
              this.snapshot = JSON.parse(m.data) as Run;
              terminalAtConnect = isTerminal(this.snapshot.status);
              yield { type: 'snapshot', run: this.snapshot, connection: this.connections };
              continue;
            }
            const item = this.#accept(JSON.parse(m.data) as RunEvent);
            if (!item) continue;
            progressed = true;
            yield item;
            if (this.terminal) return;
          }
        }
        if (terminalAtConnect) {
          // The run ended while we were away: the log holds what the closed stream did not send.
          for (const ev of await this.client.listRunEvents(this.runId, { afterSequence: this.lastSequence, signal: conn.signal })) {
            const item = this.#accept(ev);
            if (item) yield item;
          }
          if (this.terminal) return;
        }
        error = new Error('the stream closed before the run ended');
      } catch (err) {
        if (user?.aborted) return;
        if (err instanceof ApiError && !RETRYABLE.has(err.status)) throw err;
        error = err;
      } finally {
        clearTimeout(idle);
        user?.removeEventListener('abort', stop);
        conn.abort();
      }
      if (user?.aborted) return;
      failures = progressed ? 1 : failures + 1;
      if (failures > maxReconnects) throw new Error(`run ${this.runId}: stream lost after ${maxReconnects} reconnects: ${(error as Error)?.message ?? error}`);
      yield { type: 'reconnecting', attempt: failures, after: this.lastSequence, error };
      const retryAfter = error instanceof ApiError ? error.retryAfterSeconds : null;
      try {
        await sleep(retryAfter !== null ? retryAfter * 1000 : progressed ? 0 : this.client.backoff(failures), user);
      } catch {
        return;
      }
    }
  }
}
