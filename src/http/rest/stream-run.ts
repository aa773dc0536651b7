import { once } from 'node:events';
import { ApiError, notFound } from '../../domain/errors.ts';
import { fork } from '../../services/deps.ts';
import { isUuid } from '../../services/ids.ts';
import { followRunEvents } from '../../services/runs/follow-run-events.ts';
import { parseCursor } from '../../services/runs/list-run-events.ts';
import { queueOf } from '../../services/runs/queue-positions.ts';
import { assertOutputsFit, findAccountRun, toPublicRun, type PublicRunEvent } from '../../services/runs/run-views.ts';
import { header, type RestCall } from './rest-adapter.ts';

/** Concurrent streams one API key may hold open on this process (API4: unrestricted resource use). */
export const MAX_STREAMS_PER_KEY = 100;

/** Open-stream counts per API key; a key over its limit gets 429 `rate_limited` before the stream starts. */
export class StreamSlots {
  readonly #open = new Map<string, number>();
  constructor(readonly limit = MAX_STREAMS_PER_KEY) {}

  /** Takes a slot or throws 429; the returned release is idempotent. */
  acquire(keyId: string): () => void {
    const n = this.#open.get(keyId) ?? 0;
    if (n >= this.limit) {
      throw new ApiError('rate_limited', `this API key already has ${this.limit} open streams; close one before opening another`, {
        headers: { 'Retry-After': '5' },
      });
    }
    this.#open.set(keyId, n + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.#open.get(keyId) ?? 1) - 1;
      if (left > 0) this.#open.set(keyId, left);
      else this.#open.delete(keyId);
    };
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
 * GET /runs/{id}/stream (contract §2 framing): `event: snapshot` with the Run, then each event as
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
  const release = c.streams.acquire(c.principal.apiKeyId);
  res.once('close', release);
  if (res.destroyed || req.socket.destroyed) release();

  res.writeHead(200, {
    'Content-Type': 'text/event-stream; charset=utf-8',
    'Cache-Control': 'no-store',
    Connection: 'keep-alive',
    'X-Accel-Buffering': 'no',
  });
  res.socket?.setNoDelay(true);

  let closed = false;
  const write = async (frame: string) => {
    if (closed) return;
    heartbeat.refresh();
    // Backpressure: a slow client makes its own stream wait, never the engine or other streams.
    if (!res.write(frame)) await Promise.race([once(res, 'drain'), once(res, 'close')]);
  };
  const heartbeat = setInterval(() => {
    if (!closed) res.write(': heartbeat\n\n');
  }, deps.config.sseHeartbeatMs);
  heartbeat.unref();

  let stop: () => void = () => undefined;
  const end = () => {
    if (closed) return;
    closed = true;
    clearInterval(heartbeat);
    stop();
    res.end();
  };
  res.on('close', () => {
    closed = true;
    clearInterval(heartbeat);
    stop();
  });

  await write(`event: snapshot\ndata: ${JSON.stringify(toPublicRun(run, await queueOf(deps, run)))}\n\n`);
  if (['completed', 'failed', 'cancelled'].includes(run.status)) return end();

  // The stream's closures outlive the request: they keep the logger, not the whole call (parsed
  // request, validation results), which would cost every open stream a few KiB.
  const log = c.ctx.log;
  stop = followRunEvents(
    deps,
    runId,
    cursor ?? 0,
    (ev) => write(eventFrame(ev)),
    (err) => {
      if (err) log.warn({ err, runId }, 'stream ended by an error');
      end();
    },
  );
  if (closed) stop();
}

