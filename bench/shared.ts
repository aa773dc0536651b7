/**
 * What the benchmark driver (bench/run.ts) and the server child (bench/server.ts) share: the fixed ids of
 * bench/catalog.yaml, the IPC messages between them, and small statistics helpers.
 */

export const BENCH_ACCOUNT_ID = '00000000-0000-4000-8000-0000000be001';
export const BENCH_KEY = 'wr_bench_key';
export const WORKFLOW_3 = '00000000-0000-4000-8000-0000000bf003';
export const VERSION_3 = '00000000-0000-4000-8000-0000bf003001';
export const WORKFLOW_1 = '00000000-0000-4000-8000-0000000bf001';
export const VERSION_1 = '00000000-0000-4000-8000-0000bf001001';
/** Steps between short delays: a run that keeps writing events for a few seconds (the streams part). */
export const WORKFLOW_LIVE = '00000000-0000-4000-8000-0000000bf005';
/** Fixed so every child process of one run (and the floor) seals and fingerprints alike. */
export const BENCH_ENCRYPTION_KEY = '6262656e6368206b65792c206e6f7420612073656372657420617420616c6c21';

/** One line of the results table. */
export interface Row {
  group: string;
  name: string;
  clients: string;
  value: string;
  p50?: number;
  p99?: number;
  baseline: string;
  baseP50?: number;
  baseP99?: number;
  ratio: string;
  target: string;
  verdict: '' | 'met' | 'MISS';
}

/** How the parent configures a server child (JSON in the BENCH_CHILD environment variable). */
export interface ChildOptions {
  /** `null`: runs stay queued (NullEngine); `embedded`: the default engine drives them; `temporal`: ENGINE=temporal with its in-process worker. */
  engine: 'null' | 'embedded' | 'temporal';
  /** With engine `temporal`: the Temporal server and the task queue of the run workflow. */
  temporal?: { address: string; taskQueue: string };
  databaseUrl?: string;
  /** PGlite data directory (a fresh temporary directory per child) when databaseUrl is unset. */
  dataDir: string;
  runCapacity: number;
  /** Extra API keys added to the bench account (the streams benchmark); their secrets. */
  extraKeys: string[];
  /** Extra accounts, each with its own wallet and one API key (this secret); they run the bench workflows. */
  extraAccounts: string[];
  /** Start the bare node:http floor server too. */
  floor: boolean;
  /**
   * Track every accepted run and report it when terminal (what closed-loop clients wait for). Off where
   * nothing waits for runs, so the tracking's checks cost neither the server process nor Postgres there.
   */
  track: boolean;
  /** Record when each run's events were published on the bus (the `publishes` command answers them). */
  publishTimes?: boolean;
}

export interface ChildReady {
  type: 'ready';
  appUrl: string;
  floorUrl: string | null;
  pid: number;
  /** How the floor reaches the database, for the report. */
  floorDriver: string | null;
}

/** Server-side figures of one measured step. */
export interface StepStats {
  wallMs: number;
  /** CPU time of the server process (user + system), ms. */
  cpuMs: number;
  eventLoopDelay: { p50: number; p99: number; max: number };
  sql: SqlStats;
}

export interface SqlStats {
  statements: number;
  /** Statement count by its first words ("select … from runs", "insert into run_event_batches", "begin"). */
  byKind: Record<string, number>;
  /** Summed latency (ms, as MikroORM measures it: issue → result, waiting for a connection included) by kind. */
  msByKind: Record<string, number>;
  /** The slowest statements seen (ms, kind). */
  slowest: [number, string][];
}

export interface MemoryStats {
  heapUsed: number;
  heapTotal: number;
  rss: number;
  external: number;
  arrayBuffers: number;
}

export interface ProfileSummary {
  totalMs: number;
  /** Self time by category (ms). */
  categories: [string, number][];
  /** Self time by function (ms), the heaviest first. */
  functions: [string, number][];
}

/** Parent → child. */
export type Command =
  | { id: number; cmd: 'stepStart'; countSql?: boolean }
  | { id: number; cmd: 'stepEnd' }
  | { id: number; cmd: 'memory' }
  | { id: number; cmd: 'appendLive'; runId: string; marker: string }
  | { id: number; cmd: 'floorBroadcast'; marker: string }
  | { id: number; cmd: 'clock' }
  /** The publishes recorded since the last call (publishTimes): run id → [last sequence, wall ms, …]. */
  | { id: number; cmd: 'publishes' }
  | { id: number; cmd: 'profileStart' }
  | { id: number; cmd: 'profileStop' }
  | { id: number; cmd: 'sql'; text: string; params?: unknown[] }
  /** Instrumentation on or off (src/observability/metrics.ts), to measure what it costs. */
  | { id: number; cmd: 'metrics'; on: boolean }
  /** CPU µs of what one POST /runs records, on and off, over `n` simulated requests. */
  | { id: number; cmd: 'metricsMicro'; n: number }
  | { id: number; cmd: 'close' };

/** Child → parent: a reply to a command, or a tracked run that reached a terminal state. */
export type ChildMessage =
  | ChildReady
  | { type: 'reply'; id: number; ok: true; value: unknown }
  | { type: 'reply'; id: number; ok: false; error: string }
  | { type: 'terminal'; runs: { id: string; status: string }[] };

/** Wall clock with sub-millisecond resolution, comparable across processes of one machine. */
export const wallNow = (): number => performance.timeOrigin + performance.now();

export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i]!;
}

export function summarise(values: number[]): { n: number; p50: number; p99: number; max: number; mean: number } {
  const s = [...values].sort((a, b) => a - b);
  const mean = s.length ? s.reduce((a, b) => a + b, 0) / s.length : NaN;
  return { n: s.length, p50: percentile(s, 50), p99: percentile(s, 99), max: s.length ? s[s.length - 1]! : NaN, mean };
}

/** First words of a statement, as a stable label: `insert into run_event_batches`, `update runs`, `with … update runs`. */
export function sqlKind(sql: string): string {
  const s = sql.replace(/\s+/g, ' ').trim().toLowerCase();
  if (/^(begin|commit|rollback|savepoint|release)/.test(s)) return s.split(' ')[0]!;
  if (s.startsWith('with ')) {
    const writes = [...s.matchAll(/\b(update|insert into|delete from) "?([a-z_]+)"?/g)].map((m) => `${m[1]} ${m[2]}`);
    const main = /\)\s*(select|insert into|update|delete from)\s+(?:\*\s+from\s+)?"?([a-z_.]+)?/.exec(s.slice(s.lastIndexOf(')')));
    return `with(${[...new Set(writes)].join(', ') || 'select'})${main ? ` ${main[1]}` : ''}`;
  }
  let m = /^(insert into|update|delete from) "?([a-z_]+)"?/.exec(s);
  if (m) return `${m[1]} ${m[2]}`;
  m = /^select .*? from "?([a-z_]+)"?/.exec(s);
  if (m) return `select ${m[1]}`;
  return s.split(' ').slice(0, 3).join(' ');
}
