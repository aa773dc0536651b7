import type { Deps } from '../deps.ts';
import { fork } from '../deps.ts';
import { readEvents, type PublicRunEvent } from './run-views.ts';

export const TERMINAL_EVENT_TYPES = new Set(['run.completed', 'run.failed', 'run.cancelled']);
const PAGE = 1000;

interface SharedRead {
  /** The newest sequence its starter had been told of when the read began: the read sees at least that far. */
  knows: number;
  page: Promise<PublicRunEvent[]>;
}

/** In-flight log reads per database, keyed by run and cursor. */
const inflight = new WeakMap<object, Map<string, SharedRead>>();

/**
 * One query for every follower of a run at the same cursor: when an event reaches 1000 caught-up
 * streams, they all ask for the page after the same sequence in the same tick, and share one read
 * instead of queueing 1000 identical SELECTs on the pool. A follower joins a read in flight only if
 * that read began after its starter had been told of everything the joiner has been told of (a
 * notification is sent after its commit, so such a read sees it); otherwise it starts a fresh one.
 * The events are shared objects: callers must not mutate them.
 */
function readPage(deps: Pick<Deps, 'orm'>, runId: string, after: number, knows: number): Promise<PublicRunEvent[]> {
  let reads = inflight.get(deps.orm);
  if (!reads) inflight.set(deps.orm, (reads = new Map()));
  const key = `${runId}:${after}`;
  const running = reads.get(key);
  if (running && running.knows >= knows) return running.page;
  const read: SharedRead = { knows, page: readEvents(fork(deps), runId, after, PAGE) };
  reads.set(key, read);
  const forget = () => {
    if (reads.get(key) === read) reads.delete(key);
  };
  read.page.then(forget, forget);
  return read.page;
}

/**
 * Replay-then-tail of a run's log, shared by the SSE stream and the GraphQL subscription. It subscribes
 * to the bus before the first read, and every read starts after the last delivered sequence, so an event
 * committed between the replay and the subscription is neither lost nor delivered twice. It keeps
 * reading while it has been told of a sequence it has not delivered yet. `deliver` may return a promise
 * (backpressure): no read happens while a delivery is pending, so a slow client holds one page at most,
 * never an unbounded queue.
 */
export function followRunEvents(
  deps: Pick<Deps, 'bus' | 'orm'>,
  runId: string,
  afterSequence: number,
  deliver: (event: PublicRunEvent) => void | Promise<void>,
  onEnd: (err?: unknown) => void,
): () => void {
  let last = afterSequence;
  /** The newest sequence the bus announced for this run. */
  let told = afterSequence;
  let closed = false;
  let reading = false;

  const pump = async () => {
    if (closed || reading) return; // a running pump sees the new `told` before it stops
    reading = true;
    try {
      for (;;) {
        const knew = told;
        const page = await readPage(deps, runId, last, knew);
        for (const ev of page) {
          if (closed) return;
          last = ev.sequence;
          await deliver(ev);
          if (TERMINAL_EVENT_TYPES.has(ev.type)) {
            stop();
            onEnd();
            return;
          }
        }
        if (closed) return;
        if (page.length === PAGE) continue;
        // Announced but not seen: read again, unless this read already knew of it and found nothing
        // (then only a later notification can help, and a loop here would spin).
        if (last >= told || (page.length === 0 && knew >= told)) return;
      }
    } catch (err) {
      if (!closed) {
        stop();
        onEnd(err);
      }
    } finally {
      reading = false;
    }
  };

  const unsubscribe = deps.bus.subscribe(runId, (seq) => {
    if (seq > told) told = seq;
    if (seq > last) void pump();
  });
  const stop = () => {
    closed = true;
    unsubscribe();
  };
  void pump();
  return stop;
}
