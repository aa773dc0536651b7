import { EventEmitter } from 'node:events';
import pg from 'pg';
import type { Logger } from '../../logger.ts';
import type { RunEventBus } from './bus.ts';
import type { RunEventListener } from '../../runs/run-event-bus.ts';
import type { PublicRunEvent } from '../../runs/run-views.ts';
import { ITEMS_PER_NOTIFICATION, notificationItems } from '../../runs/run-event-bus.ts';
import { NOTIFY_EACH, NOTIFY_ONE, RUN_LAST_SEQUENCES } from '../../sql/run-notifications.ts';
import type { Statement } from '../../db/statement.ts';

/**
 * The run event bus across processes (ENGINE=temporal with DATABASE_URL): the worker writes run events,
 * the API process tails them over SSE / GraphQL. A dedicated `pg` connection LISTENs on the channel
 * `run_events`; `publish` notifies local subscribers at once and sends `NOTIFY run_events, '<runId>:<seq>'`
 * to the other processes, batched: one round trip for all the runs published meanwhile, each with its
 * newest sequence, and at most one every `notifyGapMs` (a quiet bus sends at once; a busy one lets the
 * publishes of the next few milliseconds join, so a run's events cost the other processes a fraction
 * of a NOTIFY instead of one each). Notifications this connection sent itself are ignored (already delivered locally).
 * They are not sent by the statements that grow the logs: Postgres serialises the commits of all the
 * transactions that NOTIFY, database-wide, under a lock held until each commit is flushed, which would
 * put every acceptance and every run's settlement of every process in one line. The one exception is a
 * notification the bus would send at once anyway, which a settlement may carry (claimNotify,
 * docs/round-trips.md#notifications-carried-by-settlements): at most one such transaction per gap.
 *
 * To other processes it only says "the log of run X grew to N" (the events a publish carries go to this
 * process's readers only): readers there re-read the log from their own cursor, so a late, duplicated or
 * coalesced notification never loses or repeats an event. After a lost connection it reconnects with
 * backoff, LISTENs again, publishes what was pending and tells every local subscriber its run's current
 * `last_sequence`, so nothing missed during the gap stays unseen.
 *
 * The same connection LISTENs on `run_cancels`: a cancel committed by one process reaches the embedded
 * engine executing the run in another at once (a cancel missed while disconnected is found by the
 * engine's lease renewal instead).
 */

export const RUN_EVENTS_CHANNEL = 'run_events';
/** `NOTIFY run_cancels, '<runId>'`: a run was cancelled; the engine executing it aborts its work. */
export const RUN_CANCELS_CHANNEL = 'run_cancels';
/** Emitter event of cancels (run ids are the other event names). */
const CANCEL = Symbol('cancel');
/** Emitter event of any run event notified by another process. */
const ACTIVITY = Symbol('activity');
/** Run ids (36 characters and a comma) that fit a NOTIFY payload (under 8,000 bytes). */
const CANCELS_PER_NOTIFICATION = 200;

export interface PostgresRunEventBusOptions {
  connectionString: string;
  log?: Pick<Logger, 'warn' | 'error' | 'info'>;
  /** First reconnect delay, doubled up to 10 s. Default 200 ms. */
  reconnectDelayMs?: number;
  /** Least time between two NOTIFY round trips of run events. Default 5 ms. */
  notifyGapMs?: number;
}

export class PostgresRunEventBus implements RunEventBus {
  readonly #opts: PostgresRunEventBusOptions;
  readonly #emitter = new EventEmitter();
  /** runId → newest sequence not yet sent to Postgres. */
  readonly #pending = new Map<string, number>();
  #client: pg.Client | null = null;
  #connecting: Promise<void> | null = null;
  #flushing: Promise<void> | null = null;
  /** The flush scheduled (an immediate or, within notifyGapMs of the last one, a timer), or null. */
  #flushTimer: { cancel: () => void } | null = null;
  /** When the last NOTIFY of run events was sent (performance.now()). */
  #lastNotifyAt = -Infinity;
  readonly #notifyGapMs: number;
  #closed = false;
  /** Runs whose sequence a transaction notified (claimNotify): their publish sends nothing. */
  readonly #notified = new Map<string, number>();
  /**
   * The same, until its notification comes back to this connection, so that it is not told again. An
   * echo heard before its transaction's result reached this process is told twice (harmless: readers
   * re-read from their cursor), and its entry waits for the bound below.
   */
  readonly #echoes = new Map<string, number>();
  #retryMs: number;
  #reconnectTimer: NodeJS.Timeout | undefined;
  /** Connections made so far (1 after the first connect); for tests and logs. */
  connections = 0;

  /** True while LISTENing. */
  get listening(): boolean {
    return this.#client !== null;
  }

  /** The server process id of the listening connection (tests terminate it to simulate a lost link). */
  get backendPid(): number | null {
    return (this.#client as unknown as { processID?: number } | null)?.processID ?? null;
  }

  constructor(opts: PostgresRunEventBusOptions) {
    this.#opts = opts;
    this.#retryMs = opts.reconnectDelayMs ?? 200;
    this.#notifyGapMs = opts.notifyGapMs ?? 5;
    this.#emitter.setMaxListeners(0);
  }

  /** Connects and LISTENs; resolves once listening. Publishing and subscribing work before it. */
  connect(): Promise<void> {
    if (this.#closed) return Promise.reject(new Error('the run event bus is closed'));
    if (this.#client) return Promise.resolve();
    this.#connecting ??= this.#connect().finally(() => {
      this.#connecting = null;
    });
    return this.#connecting;
  }

  async #connect(): Promise<void> {
    const client = new pg.Client({ connectionString: this.#opts.connectionString, application_name: 'run-event-bus' });
    client.on('notification', (msg) => this.#onNotification(client, msg));
    client.on('error', (err) => this.#lost(client, err));
    client.on('end', () => this.#lost(client, null));
    await client.connect();
    await client.query(`LISTEN ${RUN_EVENTS_CHANNEL}; LISTEN ${RUN_CANCELS_CHANNEL}`);
    if (this.#closed) {
      await client.end().catch(() => undefined);
      return;
    }
    const reconnected = this.connections > 0;
    this.#client = client;
    this.connections++;
    this.#retryMs = this.#opts.reconnectDelayMs ?? 200;
    if (reconnected) {
      this.#opts.log?.info({ channel: RUN_EVENTS_CHANNEL }, 'run event bus reconnected');
      await this.#resync(client);
    }
    this.#scheduleFlush();
  }

  #onNotification(client: pg.Client, msg: pg.Notification): void {
    if (!msg.payload) return;
    if (msg.processId === (client as unknown as { processID?: number }).processID) return; // our own NOTIFY
    if (msg.channel === RUN_CANCELS_CHANNEL) {
      for (const runId of msg.payload.split(',')) this.#emitter.emit(CANCEL, runId);
      return;
    }
    if (msg.channel !== RUN_EVENTS_CHANNEL) return;
    for (const [runId, seq] of notificationItems(msg.payload)) {
      if (this.#echoes.get(runId) === seq) {
        this.#echoes.delete(runId); // a transaction of this process notified it, and it was told here then
        continue;
      }
      this.#emitter.emit(runId, seq);
    }
    this.#emitter.emit(ACTIVITY);
  }

  #lost(client: pg.Client, err: Error | null): void {
    if (this.#client !== client) return;
    this.#client = null;
    client.removeAllListeners('notification');
    void client.end().catch(() => undefined);
    if (this.#closed) return;
    this.#opts.log?.warn({ err }, 'run event bus lost its connection; reconnecting');
    this.#scheduleReconnect();
  }

  #scheduleReconnect(): void {
    if (this.#closed || this.#reconnectTimer) return;
    const delay = this.#retryMs;
    this.#retryMs = Math.min(10_000, this.#retryMs * 2);
    this.#reconnectTimer = setTimeout(() => {
      this.#reconnectTimer = undefined;
      this.connect().catch((err) => {
        this.#opts.log?.warn({ err }, 'run event bus could not reconnect');
        this.#scheduleReconnect();
      });
    }, delay);
    this.#reconnectTimer.unref();
  }

  /** After a reconnect: tell every local subscriber where its run's log is now. */
  async #resync(client: pg.Client): Promise<void> {
    const ids = this.#emitter.eventNames().filter((n): n is string => typeof n === 'string'); // not CANCEL
    if (ids.length === 0) return;
    try {
      const { rows } = await client.query<{ id: string; last_sequence: number }>(named(RUN_LAST_SEQUENCES, [ids]));
      for (const r of rows) this.#emitter.emit(r.id, Number(r.last_sequence));
    } catch (err) {
      this.#opts.log?.warn({ err }, 'run event bus could not resynchronise its subscribers');
    }
  }

  publish(runId: string, lastSequence: number, events?: readonly PublicRunEvent[]): void {
    this.#emitter.emit(runId, lastSequence, events);
    if (this.#closed) return;
    const told = this.#notified.get(runId);
    if (told !== undefined) {
      this.#notified.delete(runId);
      if (told >= lastSequence) return;
    }
    const prev = this.#pending.get(runId);
    if (prev === undefined || lastSequence > prev) this.#pending.set(runId, lastSequence);
    this.#scheduleFlush();
  }

  claimNotify(): string | null {
    if (this.#closed || !this.#client || this.#pending.size > 0 || this.#flushing || this.#flushTimer) return null;
    const now = performance.now();
    if (now < this.#lastNotifyAt + this.#notifyGapMs) return null;
    this.#lastNotifyAt = now;
    return RUN_EVENTS_CHANNEL;
  }

  notifiedBy(runs: ReadonlyMap<string, number>): void {
    // Bounded: an entry whose publish or echo never comes (a run written by another statement meanwhile) must not pile up.
    if (this.#notified.size > 10_000) this.#notified.clear();
    if (this.#echoes.size > 10_000) this.#echoes.clear();
    for (const [runId, seq] of runs) {
      this.#notified.set(runId, seq);
      this.#echoes.set(runId, seq);
    }
  }

  subscribe(runId: string, listener: RunEventListener): () => void {
    this.#ensureListening();
    this.#emitter.on(runId, listener);
    return () => this.#emitter.off(runId, listener);
  }

  publishCancel(runIds: readonly string[]): void {
    if (this.#closed || runIds.length === 0) return;
    // Rare and urgent: sent at once on the pool-less listening connection (or a short-lived one before it
    // exists), the ids comma-separated, as many to a notification as its payload limit takes.
    const send = async () => {
      if (!this.#client) await this.connect();
      for (let i = 0; i < runIds.length; i += CANCELS_PER_NOTIFICATION) {
        await this.#client!.query(named(NOTIFY_ONE, [RUN_CANCELS_CHANNEL, runIds.slice(i, i + CANCELS_PER_NOTIFICATION).join(',')]));
      }
    };
    const failed = 'could not tell other processes of a cancel (their lease check stops the run)';
    send().catch((err) => this.#opts.log?.warn({ err, runIds: runIds.slice(0, 10) }, failed));
  }

  onCancel(listener: (runId: string) => void): () => void {
    this.#ensureListening();
    this.#emitter.on(CANCEL, listener);
    return () => this.#emitter.off(CANCEL, listener);
  }

  onActivity(listener: () => void): () => void {
    this.#ensureListening();
    this.#emitter.on(ACTIVITY, listener);
    return () => this.#emitter.off(ACTIVITY, listener);
  }

  /** A listener needs the LISTEN in place: connect on first use (a failure retries with backoff). */
  #ensureListening(): void {
    if (!this.#client && !this.#connecting && !this.#closed && !this.#reconnectTimer) {
      this.connect().catch((err) => {
        this.#opts.log?.warn({ err }, 'run event bus could not connect');
        this.#scheduleReconnect();
      });
    }
  }

  #scheduleFlush(): void {
    if (this.#flushTimer || this.#pending.size === 0) return;
    const flush = () => {
      this.#flushTimer = null;
      void this.#flush();
    };
    const wait = this.#lastNotifyAt + this.#notifyGapMs - performance.now();
    if (wait <= 0) {
      const immediate = setImmediate(flush);
      this.#flushTimer = { cancel: () => clearImmediate(immediate) };
    } else {
      const timer = setTimeout(flush, wait);
      this.#flushTimer = { cancel: () => clearTimeout(timer) };
    }
  }

  /** Sends the pending notifications, one statement; kept for the next connection when it fails. */
  async #flush(): Promise<void> {
    if (this.#flushing) {
      await this.#flushing;
      return this.#scheduleFlush();
    }
    const client = this.#client;
    if (!client) {
      if (!this.#closed && !this.#connecting) this.connect().catch(() => this.#scheduleReconnect());
      return;
    }
    if (this.#pending.size === 0) return;
    const batch = [...this.#pending];
    this.#pending.clear();
    this.#lastNotifyAt = performance.now();
    const payloads: string[] = [];
    for (let i = 0; i < batch.length; i += ITEMS_PER_NOTIFICATION) {
      payloads.push(
        batch
          .slice(i, i + ITEMS_PER_NOTIFICATION)
          .map(([id, seq]) => `${id}:${seq}`)
          .join(','),
      );
    }
    this.#flushing = client
      .query(named(NOTIFY_EACH, [RUN_EVENTS_CHANNEL, payloads]))
      .then(
        () => undefined,
        (err) => {
          // Put them back (newer publishes win) and let the reconnect send them.
          for (const [id, seq] of batch) if (!(this.#pending.get(id)! >= seq)) this.#pending.set(id, seq);
          this.#opts.log?.warn({ err }, 'run event bus could not notify');
        },
      )
      .finally(() => {
        this.#flushing = null;
      });
    await this.#flushing;
    if (this.#pending.size) this.#scheduleFlush();
  }

  /** Sends everything published so far now, without waiting for the gap, and waits for it (tests, shutdown). */
  async drain(): Promise<void> {
    for (let i = 0; i < 50 && (this.#pending.size > 0 || this.#flushing || this.#flushTimer); i++) {
      if (this.#flushing) await this.#flushing;
      else if (this.#flushTimer) {
        this.#flushTimer.cancel();
        this.#flushTimer = null;
        await this.#flush();
      } else await new Promise((r) => setImmediate(r));
      if (!this.#client && !this.#connecting) break;
    }
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    await this.drain().catch(() => undefined);
    this.#closed = true;
    this.#flushTimer?.cancel();
    this.#flushTimer = null;
    clearTimeout(this.#reconnectTimer);
    await this.#connecting?.catch(() => undefined);
    const client = this.#client;
    this.#client = null;
    if (client) {
      client.removeAllListeners('notification');
      await client.end().catch(() => undefined);
    }
    this.#emitter.removeAllListeners();
  }
}

/** A src/sql statement as a named prepared statement of this bus's own `pg` connection. */
function named(s: Statement, values: unknown[]): pg.QueryConfig {
  return { name: s.name, text: s.text, values };
}
