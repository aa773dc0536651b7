import { createHash } from 'node:crypto';
import type { Deps } from '../runs/deps.ts';
import { fork } from '../runs/deps.ts';
import { followRunEvents } from '../runs/follow-run-events.ts';
import type { PublicRunEvent } from '../runs/run-views.ts';
import { notFoundError } from './errors.ts';
import { badInput } from './limits.ts';
import { runsByIds } from './queries/runs.ts';
import { isTerminal } from '../domain/run-status.ts';
import { subscriptionOpen } from '../observability/metrics.ts';

export type StreamedRunEvent = PublicRunEvent & { runId: string };

/**
 * The `runEvents` subscription's source: replay from the cursor, then tail, without gaps or
 * duplicates, ending after the run's terminal event. The ordering guarantees come from
 * followRunEvents (the same code the REST SSE stream uses: bus subscription before the first read,
 * every read from the last delivered sequence). This adapter turns its push callbacks into a pull
 * iterator with backpressure of one event, and `return()` (client gone) stops it at once, even while
 * it waits for the next event.
 */
/**
 * Holder of the GraphQL subscriptions for the open-stream limit: the internal token (one per deployment),
 * named by a digest so the token itself is never stored.
 */
const tokenHolder = (token: string) => `graphql:${createHash('sha256').update(token).digest('hex').slice(0, 32)}`;

export async function runEventStream(
  deps: Pick<Deps, 'bus' | 'orm' | 'config' | 'streams'>,
  runId: string,
  afterSequence: number | null | undefined,
): Promise<AsyncIterableIterator<StreamedRunEvent>> {
  const after = afterSequence ?? 0;
  if (!Number.isSafeInteger(after) || after < 0) throw badInput('afterSequence must be an integer >= 0');
  const id = runId.toLowerCase();
  const run = (await runsByIds(fork(deps), [id])).get(id);
  if (!run) throw notFoundError('run');
  // A finished run whose log is already past the cursor has nothing more to say: complete at once.
  if (isTerminal(run.status) && after >= run.lastSequence) return emptyIterator();
  // The same open-stream limit as REST streams (MAX_STREAMS_PER_KEY), for the token; 429-like refusal
  // as a TOO_MANY_STREAMS error before anything is followed.
  const holder = tokenHolder(deps.config.internalApiToken);
  const slots = deps.streams;
  await slots?.acquire(holder);

  const items: { event: StreamedRunEvent; taken: () => void }[] = [];
  let ended = false;
  let failure: { error: unknown } | null = null;
  let wake: (() => void) | null = null;
  // Counted open from here until the stream ends or the client leaves, once.
  // Its slot is given back and the gauge lowered once, whichever end comes first.
  let open = true;
  subscriptionOpen(1);
  const release = () => {
    if (!open) return;
    open = false;
    subscriptionOpen(-1);
    slots?.release(holder);
  };
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
      release();
      ended = true;
      failure = err ? { error: err } : null;
      signal();
    },
  });

  const finish = () => {
    release();
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
            throw f.error;
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
