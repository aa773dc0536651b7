import type { Deps } from './deps.ts';
import { outsideTransaction, query } from '../db/statement.ts';
import { isTerminal } from '../domain/run-status.ts';
import { RUN_STATUS } from '../sql/runs.ts';
import { readEvents, type PublicRunEvent } from './run-views.ts';

export const TERMINAL_EVENT_TYPES = new Set(['run.completed', 'run.failed', 'run.cancelled']);
const PAGE = 1000;

interface SharedRead {
  /** The newest sequence its starter had been told of when the read began: the read sees at least that far. */
  knows: number;
  /** When it began, on `clock`. */
  began: number;
  page: Promise<PublicRunEvent[]>;
}

/** In-flight log reads per database, keyed by run and cursor. */
const inflight = new WeakMap<object, Map<string, SharedRead>>();
/** Orders the beginnings of reads and of followers' subscriptions (one thread: a counter is exact). */
let clock = 0;

/**
 * One query for every follower of a run at the same cursor: when an event reaches 1000 caught-up
 * streams, they all ask for the page after the same sequence in the same tick, and share one read
 * instead of queueing 1000 identical SELECTs on the pool. A follower joins a read in flight only if
 * that read began after its starter had been told of everything the joiner has been told of (a
 * notification is sent after its commit, so such a read sees it); otherwise it starts a fresh one.
 * A read that began before the joiner subscribed may have missed an event the joiner will never be
 * told of (committed and announced in between): the follower reads once more after it
 * (RunFollower's `#since`). The events are shared objects: callers must not mutate them.
 */
function readPage(deps: Pick<Deps, 'orm'>, runId: string, after: number, knows: number): SharedRead {
  let reads = inflight.get(deps.orm);
  if (!reads) inflight.set(deps.orm, (reads = new Map<string, SharedRead>()));
  const key = `${runId}:${after}`;
  const running = reads.get(key);
  if (running && running.knows >= knows) return running;
  const read: SharedRead = { knows, began: ++clock, page: readEvents(outsideTransaction(deps.orm), runId, after, PAGE) };
  reads.set(key, read);
  const forget = () => {
    if (reads.get(key) === read) reads.delete(key);
  };
  read.page.then(forget, forget);
  return read;
}

/** Where a follower's events go. `deliver` may return a promise (backpressure); `end` is called once. */
export interface RunEventSink {
  deliver(event: PublicRunEvent): void | Promise<void>;
  end(err?: unknown): void;
}

/**
 * Replay-then-tail of a run's log, shared by the SSE stream and the GraphQL subscription. It subscribes
 * to the bus before the first read, and every read starts after the last delivered sequence, so an event
 * committed between the replay and the subscription is neither lost nor delivered twice. It keeps
 * reading while it has been told of a sequence it has not delivered yet. Events a publish of this
 * process carries (src/runs/written.ts) are delivered as they are when they continue what it delivered,
 * so a caught-up follower of a run executed here reads nothing; any gap, and every notification from
 * another process, is a read of the log. No read happens while a delivery is pending, and it holds at
 * most one page of carried events, so a slow client holds little, never an unbounded queue. `end`
 * follows the terminal event or an error; `stop()` (the caller's side going away) ends it silently.
 * A cursor at or past the run's terminal event (a resume from the last event, or a cursor beyond the
 * log) never delivers that event, so the follower also ends when the run has ended at or before its
 * cursor (`#endIfEndedBehind`).
 */
export function followRunEvents(deps: Pick<Deps, 'bus' | 'orm'>, runId: string, afterSequence: number, sink: RunEventSink): RunFollower {
  const follower = watchRunEvents(deps, runId, afterSequence);
  follower.start(sink);
  return follower;
}

/**
 * A follower subscribed, its first read of the log on its way, that delivers nothing until `start`:
 * the SSE stream begins its replay while it takes its slot and writes its snapshot. `stop()` it if it
 * never starts.
 */
export function watchRunEvents(deps: Pick<Deps, 'bus' | 'orm'>, runId: string, afterSequence: number): RunFollower {
  const follower = new RunFollower(deps, runId, afterSequence);
  follower.subscribe();
  return follower;
}

/**
 * One follower's state as one object with methods rather than a set of closures: thousands of open
 * streams each keep one, and closures (with their contexts, and a `name` property apiece under tsx's
 * keepNames) cost several times its few fields.
 */
export class RunFollower {
  /** The sequence it resumed after: events up to it are never delivered, the terminal one included. */
  readonly #cursor: number;
  #last: number;
  /** The newest sequence the bus announced for this run. */
  #told: number;
  /** When it subscribed, on `clock`: a page from a read begun earlier is followed by one more read. */
  #since = 0;
  /** The newest carried events, in order, contiguous, at most a page: the pump delivers them without a read when they continue `#last`. */
  #carried: PublicRunEvent[] | null = null;
  /** The read begun at subscription, until the pump takes it. */
  #first: SharedRead | null = null;
  #sink: RunEventSink | null = null;
  #closed = false;
  #reading = false;
  /** The run ended before the sink started (`start` ends it at once, with the error if a read failed). */
  #ended: { err?: unknown } | null = null;
  /** A status read of `#endIfEndedBehind` is in flight; `#checkAgain`: notified meanwhile, read once more. */
  #checking = false;
  #checkAgain = false;
  #unsubscribe: (() => void) | null = null;

  constructor(
    private readonly deps: Pick<Deps, 'bus' | 'orm'>,
    private readonly runId: string,
    afterSequence: number,
  ) {
    this.#cursor = afterSequence;
    this.#last = afterSequence;
    this.#told = afterSequence;
  }

  subscribe(): void {
    this.#unsubscribe = this.deps.bus.subscribe(this.runId, (seq, events) => this.#notified(seq, events));
    this.#since = ++clock;
    this.#first = readPage(this.deps, this.runId, this.#last, this.#told);
  }

  start(sink: RunEventSink): void {
    this.#sink = sink;
    if (this.#ended) return sink.end(this.#ended.err);
    void this.#pump();
  }

  stop(): void {
    this.#closed = true;
    this.#carried = null;
    this.#first = null;
    this.#unsubscribe?.();
    this.#unsubscribe = null;
  }

  #notified(seq: number, events?: readonly PublicRunEvent[]): void {
    if (seq > this.#told) this.#told = seq;
    if (events?.length) this.#carry(events);
    if (seq > this.#last) void this.#pump();
    // The log's end is at or before the cursor: if this was the terminal event, no read will deliver it.
    else if (seq <= this.#cursor && (!events?.length || events.some((ev) => TERMINAL_EVENT_TYPES.has(ev.type)))) void this.#endIfEndedBehind();
  }

  /**
   * Ends the follower when the run is terminal and its last event is at or before the cursor (one
   * status read at a time; a notification meanwhile asks for one more after it). Terminal status and
   * terminal event commit together and are announced after the commit, so a read after the
   * notification sees the status. A run that ended after the cursor is left to the pump, which
   * delivers its terminal event and ends then.
   */
  async #endIfEndedBehind(): Promise<void> {
    if (this.#closed) return;
    if (this.#checking) return void (this.#checkAgain = true);
    this.#checking = true;
    try {
      do {
        this.#checkAgain = false;
        const [row] = await query<{ status: string; last_sequence: number | string }>(outsideTransaction(this.deps.orm), RUN_STATUS, [this.runId]);
        if (this.#closed) return;
        if (row && isTerminal(row.status) && Number(row.last_sequence) <= this.#cursor) return this.#end();
      } while (this.#checkAgain);
    } catch (err) {
      this.#end(err);
    } finally {
      this.#checking = false;
    }
  }

  /** Stops and ends the sink once; before `start`, `start` ends it. */
  #end(err?: unknown): void {
    if (this.#closed) return;
    this.stop();
    if (this.#sink) this.#sink.end(err);
    else this.#ended = { err };
  }

  /**
   * Keeps carried events: after those kept when they continue them, else instead of them (whether they
   * continue what is delivered is known only when the pump takes them, after a page in hand or a read).
   */
  #carry(events: readonly PublicRunEvent[]): void {
    const kept = this.#carried;
    if (kept && events[0].sequence === kept[kept.length - 1].sequence + 1 && kept.length + events.length <= PAGE) kept.push(...events);
    else this.#carried = events.length <= PAGE ? [...events] : null;
  }

  /** The kept carried events after the last delivered one, if they continue it. */
  #takeCarried(): PublicRunEvent[] | null {
    const kept = this.#carried?.filter((ev) => ev.sequence > this.#last);
    this.#carried = null;
    return kept?.length && kept[0].sequence === this.#last + 1 ? kept : null;
  }

  async #pump(): Promise<void> {
    const sink = this.#sink;
    if (this.#closed || this.#reading || !sink) return; // a running pump sees the new `told` before it stops
    this.#reading = true;
    try {
      for (;;) {
        const first = this.#first;
        this.#first = null;
        const carried = first ? null : this.#takeCarried();
        const read = carried ? null : (first ?? readPage(this.deps, this.runId, this.#last, this.#told));
        const page = carried ?? (await read!.page);
        for (const ev of page) {
          if (this.#closed) return;
          this.#last = ev.sequence;
          await sink.deliver(ev);
          if (TERMINAL_EVENT_TYPES.has(ev.type)) {
            this.stop();
            sink.end();
            return;
          }
        }
        if (this.#closed) return;
        // Nothing after the cursor yet: the run may have ended at or before it, before the subscription.
        if (first && page.length === 0 && this.#cursor > 0) void this.#endIfEndedBehind();
        if (read && (page.length === PAGE || read.began < this.#since)) continue;
        // Announced but not seen: read again, unless this read already knew of it and found nothing
        // (then only a later notification can help, and a loop here would spin).
        if (this.#last >= this.#told || (read && page.length === 0 && read.knows >= this.#told)) return;
      }
    } catch (err) {
      this.#end(err);
    } finally {
      this.#reading = false;
    }
  }
}
