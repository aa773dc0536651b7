import type { Deps } from '../deps.ts';
import { fork } from '../deps.ts';
import { readEvents, type PublicRunEvent } from './run-views.ts';

export const TERMINAL_EVENT_TYPES = new Set(['run.completed', 'run.failed', 'run.cancelled']);
const PAGE = 1000;

/**
 * Replay-then-tail of a run's log, shared by the SSE stream and the GraphQL subscription. It subscribes
 * to the bus before the first read, and every read starts after the last delivered sequence, so an event
 * committed between the replay and the subscription is neither lost nor delivered twice. `deliver`
 * may return a promise (backpressure): no read happens while a delivery is pending, so a slow client
 * holds one page at most, never an unbounded queue.
 */
export function followRunEvents(
  deps: Pick<Deps, 'bus' | 'orm'>,
  runId: string,
  afterSequence: number,
  deliver: (event: PublicRunEvent) => void | Promise<void>,
  onEnd: (err?: unknown) => void,
): () => void {
  let last = afterSequence;
  let closed = false;
  let reading = false;
  let again = false;

  const pump = async () => {
    if (closed) return;
    if (reading) {
      again = true;
      return;
    }
    reading = true;
    try {
      do {
        again = false;
        let page: PublicRunEvent[];
        do {
          page = await readEvents(fork(deps), runId, last, PAGE);
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
        } while (page.length === PAGE && !closed);
      } while (again && !closed);
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
    if (seq > last) void pump();
  });
  const stop = () => {
    closed = true;
    unsubscribe();
  };
  void pump();
  return stop;
}
