import type { ServerResponse } from 'node:http';
import { ApiError, notFound } from '../../domain/errors.ts';
import type { Logger } from '../../logger.ts';
import { fork, type Deps } from '../../services/deps.ts';
import { isUuid } from '../../services/ids.ts';
import { followRunEvents, type RunEventSink, type RunFollower } from '../../services/runs/follow-run-events.ts';
import { parseCursor } from '../../services/runs/list-run-events.ts';
import { queueOf } from '../../services/runs/queue-positions.ts';
import { assertOutputsFit, findAccountRun, toPublicRun, type PublicRunEvent } from '../../services/runs/run-views.ts';
import type { HeartbeatTicker, Heartbeating } from './heartbeat-ticker.ts';
import { header, type RestCall } from './rest-adapter.ts';

/** Concurrent streams one API key may hold open on this process (API4: unrestricted resource use). */
export const MAX_STREAMS_PER_KEY = 100;

/** Open-stream counts per API key; a key over its limit gets 429 `rate_limited` before the stream starts. */
export class StreamSlots {
  readonly #open = new Map<string, number>();
  constructor(readonly limit = MAX_STREAMS_PER_KEY) {}

  /** Takes a slot or throws 429. The caller gives it back with `release`, once. */
  acquire(keyId: string): void {
    const n = this.#open.get(keyId) ?? 0;
    if (n >= this.limit) {
      throw new ApiError('rate_limited', `this API key already has ${this.limit} open streams; close one before opening another`, {
        headers: { 'Retry-After': '5' },
      });
    }
    this.#open.set(keyId, n + 1);
  }

  release(keyId: string): void {
    const left = (this.#open.get(keyId) ?? 1) - 1;
    if (left > 0) this.#open.set(keyId, left);
    else this.#open.delete(keyId);
  }

  open(keyId: string): number {
    return this.#open.get(keyId) ?? 0;
  }
}

/** Followers of one run share the event objects of one read, so each frame is serialised once. */
const frames = new WeakMap<PublicRunEvent, string>();
function eventFrame(ev: PublicRunEvent): string {
  let frame = frames.get(ev);
  if (frame === undefined) frames.set(ev, (frame = `id: ${ev.sequence}\nevent: ${ev.type}\ndata: ${JSON.stringify(ev)}\n\n`));
  return frame;
}

/**
 * GET /runs/{id}/stream (framing: docs/design/rules.md, "SSE stream"): `event: snapshot` with the Run, then each event as
 * `id: <sequence>` / `event: <type>` / `data: <RunEvent>`, a `: heartbeat` comment while idle, and the
 * end of the response after the terminal event. A run already terminal gets the snapshot and the close.
 */
export async function streamRun(c: RestCall, runId: string): Promise<void> {
  const { deps, req, res } = c;
  // Last-Event-ID wins over afterSequence; both are checked before the stream starts.
  const fromHeader = header(req, 'last-event-id');
  const cursor =
    fromHeader !== undefined ? parseCursor(fromHeader, 'Last-Event-ID') : parseCursor((c.api.request.query as Record<string, string>).afterSequence);
  if (!isUuid(runId)) throw notFound('run');
  const em = fork(deps);
  const run = await findAccountRun(em, c.principal.accountId, runId);
  if (!run) throw notFound('run');
  assertOutputsFit(run, deps.config.maxOutputBytes);
  c.streams.acquire(c.principal.apiKeyId);
  // From here the stream owns the slot: it gives it back when it closes, whatever happens next.
  const stream = new RunStream(res, runId, c.principal.apiKeyId, c.ctx.requestId, c.streams, c.heartbeats, deps.log);
  if (res.destroyed || req.socket.destroyed) stream.close();

  res.writeHead(200, {
    'Content-Type': 'text/event-stream; charset=utf-8',
    'Cache-Control': 'no-store',
    Connection: 'keep-alive',
    'X-Accel-Buffering': 'no',
  });
  res.socket?.setNoDelay(true);

  await stream.send(`event: snapshot\ndata: ${JSON.stringify(toPublicRun(run, await queueOf(deps, run)))}\n\n`);
  if (['completed', 'failed', 'cancelled'].includes(run.status)) return stream.end();
  stream.follow(deps, cursor ?? 0);
}

/**
 * One open stream, as one object with methods: it outlives the request, so it keeps only what it
 * needs (the response, a few ids, the app's shared slot table, heartbeat ticker and root logger), never
 * the call (parsed request, validation results, a per-request child logger) nor closures of its own.
 */
class RunStream implements RunEventSink, Heartbeating {
  #closed = false;
  #follower: RunFollower | null = null;
  /** Resolves the pending write's wait for `drain` (also on close). */
  #drained: (() => void) | null = null;

  constructor(
    private readonly res: ServerResponse,
    private readonly runId: string,
    private readonly keyId: string,
    private readonly requestId: string,
    private readonly slots: StreamSlots,
    private readonly heartbeats: HeartbeatTicker,
    private readonly log: Logger,
  ) {
    res.on('close', () => this.close());
  }

  follow(deps: Pick<Deps, 'bus' | 'orm'>, after: number): void {
    if (!this.#closed) this.#follower = followRunEvents(deps, this.runId, after, this);
  }

  async send(frame: string): Promise<void> {
    if (this.#closed) return;
    this.heartbeats.touch(this);
    // Backpressure: a slow client makes its own stream wait, never the engine or other streams.
    if (this.res.write(frame)) return;
    await new Promise<void>((resolve) => {
      this.#drained = resolve;
      this.res.once('drain', resolve);
    });
    this.#drained = null;
  }

  deliver(ev: PublicRunEvent): Promise<void> {
    return this.send(eventFrame(ev));
  }

  heartbeat(): void {
    this.res.write(': heartbeat\n\n');
  }

  /** After the terminal event or a failed read: the response ends. */
  end(err?: unknown): void {
    if (err) this.log.warn({ requestId: this.requestId, err, runId: this.runId }, 'stream ended by an error');
    if (this.#closed) return;
    this.close();
    this.res.end();
  }

  /** The client went away, the response ended or the server shuts down; runs once. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.heartbeats.drop(this);
    this.#follower?.stop();
    this.#follower = null;
    this.slots.release(this.keyId);
    this.#drained?.();
  }
}
