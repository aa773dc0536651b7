import type { Deps } from '../services/deps.ts';
import { fork } from '../services/deps.ts';
import { followRunEvents } from '../services/runs/follow-run-events.ts';
import type { PublicRunEvent } from '../services/runs/run-views.ts';
import { notFoundError } from './errors.ts';
import { badInput } from './limits.ts';
import { runsByIds } from './queries/runs.ts';

const TERMINAL = new Set(['completed', 'failed', 'cancelled']);

export type StreamedRunEvent = PublicRunEvent & { runId: string };

/**
 * The `runEvents` subscription's source: replay from the cursor, then tail, without gaps or
 * duplicates, ending after the run's terminal event. The ordering guarantees come from
 * followRunEvents (the same code the REST SSE stream uses: bus subscription before the first read,
 * every read from the last delivered sequence). This adapter turns its push callbacks into a pull
 * iterator with backpressure of one event, and `return()` (client gone) stops it at once, even while
 * it waits for the next event.
 */
export async function runEventStream(deps: Pick<Deps, 'bus' | 'orm'>, runId: string, afterSequence: number | null | undefined): Promise<AsyncIterableIterator<StreamedRunEvent>> {
  const after = afterSequence ?? 0;
  if (!Number.isSafeInteger(after) || after < 0) throw badInput('afterSequence must be an integer >= 0');
  const id = runId.toLowerCase();
  const run = (await runsByIds(fork(deps), [id])).get(id);
  if (!run) throw notFoundError('run');
  // A finished run whose log is already past the cursor has nothing more to say: complete at once.
  if (TERMINAL.has(run.status) && after >= run.lastSequence) return emptyIterator();

  const items: { event: StreamedRunEvent; taken: () => void }[] = [];
  let ended = false;
  let failure: unknown = null;
  let wake: (() => void) | null = null;
  const signal = () => {
    const w = wake;
    wake = null;
    w?.();
  };

  const follower = followRunEvents(deps, id, after, {
    deliver: (event) =>
      new Promise<void>((taken) => {
        items.push({ event: { ...event, runId: id }, taken });
        signal();
      }),
    end: (err) => {
      ended = true;
      failure = err ?? null;
      signal();
    },
  });

  const finish = () => {
    ended = true;
    follower.stop();
    for (const i of items.splice(0)) i.taken();
    signal();
  };

  const iterator: AsyncIterableIterator<StreamedRunEvent> = {
    [Symbol.asyncIterator]() {
      return iterator;
    },
    async next() {
      for (;;) {
        const item = items.shift();
        if (item) {
          item.taken();
          return { value: item.event, done: false };
        }
        if (ended) {
          if (failure) {
            const f = failure;
            failure = null;
            throw f;
          }
          return { value: undefined, done: true };
        }
        await new Promise<void>((resolve) => (wake = resolve));
      }
    },
    async return() {
      finish();
      return { value: undefined, done: true };
    },
    async throw(err?: unknown) {
      finish();
      throw err;
    },
  };
  return iterator;
}

function emptyIterator<T>(): AsyncIterableIterator<T> {
  const it: AsyncIterableIterator<T> = {
    [Symbol.asyncIterator]: () => it,
    next: async () => ({ value: undefined, done: true }),
    return: async () => ({ value: undefined, done: true }),
  };
  return it;
}
