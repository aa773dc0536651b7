import { Gauge } from 'prom-client';
import type { Pool } from 'pg';
import { metricsEnabled, registry } from './metrics.ts';
import { PRIORITIES } from '../domain/run-flow-control.ts';

/**
 * Series read at scrape time rather than counted: the run queue (deployment-wide, from the shared
 * database, with one statement per scrape) and the database connection pool of this process.
 */

export interface QueueSnapshot {
  inFlight: number;
  queued: number;
  oldestSeconds: number;
  /** Runs queued per priority class (high, normal, low). */
  queuedByPriority: [number, number, number];
  /** The concurrency key whose oldest queued run waited longest (among the line's first runs read), if any. */
  longestWaitingKey: { account: string; concurrencyKey: string; seconds: number } | null;
}

/** Reads the queue's snapshot from the shared database (the runs module's statement). */
export type QueueReader = () => Promise<QueueSnapshot>;

interface Source {
  read: QueueReader;
  capacity: number;
}

let source: Source | null = null;
let pending: Promise<QueueSnapshot | null> | null = null;

/** What the queue gauges read (the app's database). Returns the unbinding, for the app's close. */
export function bindQueueSource(read: QueueReader, capacity: number): () => void {
  const mine: Source = { read, capacity };
  source = mine;
  return () => {
    if (source === mine) source = null;
  };
}

/** One statement per scrape: the queue gauges' collectors share the snapshot of the scrape in progress. */
function snapshot(): Promise<QueueSnapshot | null> {
  if (pending) return pending;
  const s = source;
  if (!s) return Promise.resolve(null);
  pending = (async () => {
    try {
      return await s.read();
    } catch {
      // An unreachable database leaves the gauges out of this scrape (/readyz says why).
      return null;
    }
  })();
  void pending.finally(() => setImmediate(() => (pending = null)));
  return pending;
}

function queueGauge(name: string, help: string, pick: (q: QueueSnapshot) => number): void {
  new Gauge({
    name,
    help,
    registers: [registry],
    async collect() {
      const q = await snapshot();
      if (q) this.set(pick(q));
      else this.reset();
    },
  });
}

queueGauge('wr_runs_in_flight', 'Runs in flight across the deployment (running, suspended, or admitted and being prepared)', (q) => q.inFlight);
queueGauge('wr_runs_queued', 'Runs waiting in the queue for capacity, across the deployment', (q) => q.queued);
queueGauge('wr_runs_oldest_queued_age_seconds', 'Age of the oldest queued run (0 when the queue is empty)', (q) => q.oldestSeconds);
new Gauge({
  name: 'wr_runs_queued_by_priority',
  help: 'Runs waiting in the queue per priority (high, normal, low; docs/design/flow-control.md), across the deployment',
  labelNames: ['priority'] as const,
  registers: [registry],
  async collect() {
    const q = await snapshot();
    if (!q) return this.reset();
    PRIORITIES.forEach((priority, cls) => this.set({ priority }, q.queuedByPriority[cls]));
  },
});
new Gauge({
  name: 'wr_concurrency_key_longest_wait_seconds',
  help: 'The concurrency key waiting longest: the age of its oldest queued run, labelled with its account and key; no series when no keyed run is queued',
  labelNames: ['account', 'concurrency_key'] as const,
  registers: [registry],
  async collect() {
    const q = await snapshot();
    // One series at most: the key it names changes as the queue moves, so the last one is dropped first.
    this.reset();
    const k = q?.longestWaitingKey;
    if (k) this.set({ account: k.account, concurrency_key: k.concurrencyKey }, k.seconds);
  },
});
new Gauge({
  name: 'wr_runs_capacity',
  help: 'RUN_CAPACITY: runs in flight at once before the rest queue',
  registers: [registry],
  collect() {
    if (source) this.set(source.capacity);
    else this.reset();
  },
});

// ---------------------------------------------------------------------------------------------------
// Database connections (OpenTelemetry's db.client.connection.* names)

const pools = new Set<Pool>();
/** PGlite: one in-process connection; statements in flight through it (the first runs, the rest wait). */
let pgliteStatements = 0;
let pgliteOpen = 0;

/** A pg pool (Postgres server) to report; forgotten once it ends. */
export function watchPool(pool: Pool): void {
  if (metricsEnabled()) pools.add(pool);
}

/** PGlite: a statement starts (+1) or ends (-1). */
export function pgliteStatement(delta: 1 | -1): void {
  pgliteStatements += delta;
}

/** PGlite: a database opens (+1) or closes (-1). */
export function pgliteOpened(delta: 1 | -1): void {
  pgliteOpen += delta;
}

function poolTotals(): { used: number; idle: number; pending: number; max: number } {
  let used = 0;
  let idle = 0;
  let pend = 0;
  let max = 0;
  for (const p of pools) {
    if ((p as Pool & { ended?: boolean }).ended) {
      pools.delete(p);
      continue;
    }
    used += p.totalCount - p.idleCount;
    idle += p.idleCount;
    pend += p.waitingCount;
    max += (p as Pool & { options?: { max?: number } }).options?.max ?? 0;
  }
  if (pgliteOpen > 0) {
    const busy = Math.min(1, pgliteStatements);
    used += busy;
    idle += pgliteOpen - busy;
    pend += Math.max(0, pgliteStatements - 1);
    max += pgliteOpen;
  }
  return { used, idle, pending: pend, max };
}

new Gauge({
  name: 'db_client_connection_count',
  help: 'Database connections of this process by state (used, idle); PGlite is one in-process connection',
  labelNames: ['db_client_connection_state'] as const,
  registers: [registry],
  collect() {
    const t = poolTotals();
    this.labels('used').set(t.used);
    this.labels('idle').set(t.idle);
  },
});
new Gauge({
  name: 'db_client_connection_pending_requests',
  help: 'Requests waiting for a database connection (PGlite: statements queued behind the running one)',
  registers: [registry],
  collect() {
    this.set(poolTotals().pending);
  },
});
new Gauge({
  name: 'db_client_connection_max',
  help: 'Most database connections this process may open',
  registers: [registry],
  collect() {
    this.set(poolTotals().max);
  },
});
