import { outsideTransaction } from '../../db/statement.ts';
import type { ServerResponse } from 'node:http';
import { notFound } from '../../domain/errors.ts';
import type { Logger } from '../../logger.ts';
import { sseStreamOpen } from '../../observability/metrics.ts';
import { isUuid } from '../../domain/ids.ts';
import { watchRunEvents, type RunEventSink, type RunFollower } from '../../runs/follow-run-events.ts';
import { queueOf } from '../../runs/queue-positions.ts';
import { assertOutputsFit, findAccountRun, toPublicRun, type PublicRunEvent } from '../../runs/run-views.ts';
import { keyHolder, type StreamSlots } from '../../runs/stream-slots.ts';
import type { HeartbeatTicker, Heartbeating } from './heartbeat-ticker.ts';
import { header, type RestCall } from './rest-call.ts';
import { isTerminal } from '../../domain/run-status.ts';

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
  // Last-Event-ID wins over afterSequence; the document's validation checked both before the stream starts.
  const fromHeader = header(req, 'last-event-id');
  const fromQuery = (c.api.request.query as { afterSequence?: string }).afterSequence;
  const cursor = Number(fromHeader ?? fromQuery ?? 0);
  if (!isUuid(runId)) throw notFound('run');
  const em = outsideTransaction(deps.orm);
  const run = await findAccountRun(em, c.principal.accountId, runId);
  if (!run) throw notFound('run');
  assertOutputsFit(run, deps.config.maxOutputBytes);
  // The replay's first read of the log goes out now, beside taking the slot and writing the snapshot.
  const follower = isTerminal(run.status) ? null : watchRunEvents(deps, runId, cursor);
  const holder = keyHolder(c.principal.apiKeyId);
  try {
    await c.streams.acquire(holder);
  } catch (err) {
    follower?.stop();
    throw err;
  }
  // From here the stream owns the slot and the follower: it gives them back when it closes, whatever happens next.
  const stream = new RunStream(res, runId, c.principal.accountId, holder, c.ctx.requestId, c.streams, c.heartbeats, deps.log, follower);
  if (res.destroyed || req.socket.destroyed) stream.close();

  res.writeHead(200, {
    'Content-Type': 'text/event-stream; charset=utf-8',
    'Cache-Control': 'no-store',
    Connection: 'keep-alive',
    'X-Accel-Buffering': 'no',
  });
  res.socket?.setNoDelay(true);
  // The header block leaves on its own: node:http keeps it for the response's life as the string it
  // concatenated, a tree of some thirty pieces, and writing it alone flattens it into one.
  res.flushHeaders();

  await stream.send(`event: snapshot\ndata: ${JSON.stringify(toPublicRun(run, await queueOf(deps, run)))}\n\n`);
  if (!follower) return stream.end();
  stream.follow();
}

/**
 * One open stream, as one object with methods: it outlives the request, so it keeps only what it
 * needs (the response, a few ids, the app's shared slot table, heartbeat ticker and root logger), never
 * the call (parsed request, validation results, a per-request child logger) nor closures of its own.
 */
class RunStream implements RunEventSink, Heartbeating {
  #closed = false;
  /** Frames written in this tick wait in the response until it ends: a page of events leaves in one write. */
  #corked = false;
  /** Resolves the pending write's wait for `drain` (also on close). */
  #drained: (() => void) | null = null;

  constructor(
    private readonly res: ServerResponse,
    private readonly runId: string,
    private readonly accountId: string,
    private readonly holder: string,
    private readonly requestId: string,
    private readonly slots: StreamSlots,
    private readonly heartbeats: HeartbeatTicker,
    private readonly log: Logger,
    private follower: RunFollower | null,
  ) {
    res.on('close', () => this.close());
    sseStreamOpen(1);
  }

  /** After the snapshot: the events, from the follower's first page on. */
  follow(): void {
    if (!this.#closed) this.follower?.start(this);
  }

  async send(frame: string): Promise<void> {
    if (this.#closed) return;
    this.heartbeats.touch(this);
    if (!this.#corked) {
      this.#corked = true;
      this.res.cork();
      process.nextTick(() => this.#uncork());
    }
    // Backpressure: a slow client makes its own stream wait, never the engine or other streams.
    if (this.res.write(frame)) return;
    await new Promise<void>((resolve) => {
      this.#drained = resolve;
      this.res.once('drain', resolve);
    });
    this.#drained = null;
  }

  #uncork(): void {
    if (!this.#corked) return;
    this.#corked = false;
    this.res.uncork();
  }

  deliver(ev: PublicRunEvent): Promise<void> {
    return this.send(eventFrame(ev));
  }

  heartbeat(): void {
    this.res.write(': heartbeat\n\n');
  }

  /** The server shuts down: the client reconnects after `retryMs` with its Last-Event-ID, to another process. */
  endForShutdown(retryMs: number): void {
    if (this.#closed) return;
    this.res.write(`retry: ${retryMs}\n\n`);
    this.end();
  }

  /** After the terminal event or a failed read: the response ends. */
  end(err?: unknown): void {
    if (err) this.log.warn({ requestId: this.requestId, err, runId: this.runId, accountId: this.accountId }, 'stream ended by an error');
    if (this.#closed) return;
    this.close();
    // The frames held by the cork leave first: the response's own cork would hold them past its end.
    if (this.#corked) this.#uncork();
    this.res.end();
  }

  /** The client went away, the response ended or the server shuts down; runs once. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    sseStreamOpen(-1);
    this.heartbeats.drop(this);
    this.follower?.stop();
    this.follower = null;
    this.slots.release(this.holder);
    this.#drained?.();
  }
}
