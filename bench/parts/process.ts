import pg from 'pg';
import { startDevServer } from '../../src/engine/temporal/dev-server.ts';
import { freshDatabase } from '../measure.ts';
import { streamCost } from './process-streams.ts';
import { compileService, heapUsedBytes, rssBytes, startCompiled, stopService, type Started } from '../production.ts';
import { facts, notes, rows } from '../results.ts';
import { DATABASE_URL, env, log, sleep, TEMPORAL } from '../settings.ts';
import type { Row } from '../shared.ts';

// The process part of `npm run bench` (bench/run.ts): the production process idle and at start.

/** Bounds from docs/performance.md ("The process"). */
const MiB = 1024 * 1024;
const RSS_EMBEDDED = 128 * MiB;
const RSS_TEMPORAL = 160 * MiB;
const HEAP_USED = 48 * MiB;
const READY_MIGRATED_MS = 1500;
const IDLE_COMMITS_PER_10S = 1;
const STREAM_KiB = 20;
/** Open SSE streams the stream step opens (twice). */
const STREAMS = 2000;
/**
 * How long the process idles before it is measured: start-up garbage collected, timers settled, and
 * the start's own commits counted. The start's last statements (first sweeps, the engine's first
 * checks) come some seconds after /readyz, and a Postgres backend that goes idle reports its
 * transactions to the statistics up to 10 s later (PGSTAT_IDLE_INTERVAL): a shorter wait counts the
 * start's commits as idle ones.
 */
const SETTLE_MS = 20_000;

/**
 * The compiled service (`node …/src/main.js`, demo catalog) on a fresh and then a migrated database:
 * time from spawn to /readyz 200, then idle RSS, heap used and the commits Postgres counts over 10 s
 * with nothing in flight, then what open SSE streams add (process-streams.ts); on ENGINE=temporal with an in-process worker too when a Temporal CLI or
 * server is at hand. BENCH_COMPILED names a built tree (a dist/) to start instead of building one.
 */
export async function productionProcess(): Promise<void> {
  log('the production process: start time, idle memory, idle commits');
  let compiled = env.BENCH_COMPILED;
  compiled ??= compileService();
  const fresh = await freshDatabase();
  const dbEnv = (extra: Record<string, string> = {}): Record<string, string> => ({
    ...(fresh.databaseUrl ? { DATABASE_URL: fresh.databaseUrl } : {}),
    DATA_DIR: fresh.dataDir,
    ...extra,
  });
  const first = await startCompiled(compiled, dbEnv());
  await stopService(first);
  const again = await startCompiled(compiled, dbEnv({ MAX_STREAMS_PER_KEY: '0' }));
  const idle = await measureIdle(again);
  const streams = await streamCost(again, STREAMS);
  await stopService(again);
  const where = fresh.databaseUrl ? 'Postgres server' : 'PGlite';
  push(`start to /readyz, fresh database (${where})`, started(first), '', '');
  push(`start to /readyz, migrated database (${where})`, started(again), `≤ ${READY_MIGRATED_MS} ms`, again.readyMs <= READY_MIGRATED_MS);
  pushIdle(`embedded (${where})`, idle, RSS_EMBEDDED);
  push(`RSS per open SSE stream, ${STREAMS} streams (second burst)`, `${streams.rssKiB.toFixed(1)} KiB`, `≤ ${STREAM_KiB} KiB`, streams.rssKiB <= STREAM_KiB);
  push(`heap used per open SSE stream, ${STREAMS} streams (second burst, no GC)`, `${streams.heapKiB.toFixed(1)} KiB`, '', '');
  notes.push(
    `Process, SSE streams: ${STREAMS} real clients on one waiting run, opened, closed and opened again; the first burst added ` +
      `${streams.firstBurstRssKiB.toFixed(1)} KiB of RSS per stream, which stays after they close (what the burst grew), the second ${streams.rssKiB.toFixed(1)} KiB.`,
  );
  facts.streamRssKiB = streams.rssKiB;
  facts.startFreshMs = first.readyMs;
  facts.startMigratedMs = again.readyMs;
  facts.startMigratedCpuMs = again.readyCpuMs;
  facts.idleRssMiB = idle.rss / MiB;
  facts.idleHeapUsedMiB = idle.heapUsed / MiB;
  if (idle.commitsPer10s !== null) facts.idleCommitsPer10s = idle.commitsPer10s;

  if ('skip' in TEMPORAL) {
    notes.push(`Process, ENGINE=temporal: not measured (${TEMPORAL.skip}).`);
    return;
  }
  const dev = 'cli' in TEMPORAL ? await startDevServer({ cli: TEMPORAL.cli, stdio: 'ignore', logLevel: 'error' }) : null;
  try {
    const db = await freshDatabase();
    const temporalEnv = {
      ...(db.databaseUrl ? { DATABASE_URL: db.databaseUrl } : {}),
      DATA_DIR: db.dataDir,
      ENGINE: 'temporal',
      TEMPORAL_ADDRESS: dev?.address ?? (TEMPORAL as { address: string }).address,
      TEMPORAL_TASK_QUEUE: `bench-process-${process.pid}`,
    };
    // Once to migrate and register the search attributes, then the restart that is measured.
    await stopService(await startCompiled(compiled, temporalEnv));
    const t = await startCompiled(compiled, temporalEnv);
    const tIdle = await measureIdle(t);
    await stopService(t);
    push(`start to /readyz, ENGINE=temporal + worker, migrated (${where})`, started(t), '', '');
    pushIdle(`ENGINE=temporal + in-process worker (${where})`, tIdle, RSS_TEMPORAL);
    facts.temporalStartMigratedMs = t.readyMs;
    facts.temporalStartMigratedCpuMs = t.readyCpuMs;
    facts.temporalIdleRssMiB = tIdle.rss / MiB;
    facts.temporalIdleHeapUsedMiB = tIdle.heapUsed / MiB;
  } finally {
    await dev?.stop();
  }
}

interface Idle {
  rss: number;
  heapUsed: number;
  /** Postgres transactions committed in 10 s idle (null on PGlite: nothing outside the process counts them). */
  commitsPer10s: number | null;
}

async function measureIdle(s: Started): Promise<Idle> {
  await sleep(SETTLE_MS);
  let commitsPer10s: number | null = null;
  if (DATABASE_URL) {
    const c = new pg.Client({ connectionString: DATABASE_URL });
    await c.connect();
    const commits = async () => {
      // A fresh statistics snapshot each time (one statement, so one commit of this client's own).
      const { rows: r } = await c.query<{ n: string }>(
        `select xact_commit as n from pg_stat_clear_snapshot(), pg_stat_database where datname = current_database()`,
      );
      return Number(r[0]!.n);
    };
    const before = await commits();
    await sleep(10_000);
    // Less this client's own first sample.
    commitsPer10s = Math.max(0, (await commits()) - before - 1);
    await c.end();
  }
  // The first scrape builds what /metrics needs; the second reads the heap as it idles.
  await heapUsedBytes(s.url);
  const heapUsed = await heapUsedBytes(s.url);
  return { rss: rssBytes(s.proc.pid!), heapUsed, commitsPer10s };
}

/** Wall time, and the CPU the process spent (on a shared machine the wall time is mostly waiting for a core). */
const started = (s: Started) => `${s.readyMs.toFixed(0)} ms (CPU ${s.readyCpuMs.toFixed(0)} ms)`;

const mib = (n: number) => `${(n / MiB).toFixed(0)} MiB`;

function push(name: string, value: string, target: string, met: boolean | ''): void {
  const row: Row = { group: 'process', name, clients: '0', value, baseline: '', ratio: '', target, verdict: met === '' ? '' : met ? 'met' : 'MISS' };
  rows.push(row);
}

function pushIdle(what: string, idle: Idle, rssBound: number): void {
  push(`idle RSS, ${what}`, mib(idle.rss), `≤ ${mib(rssBound)}`, idle.rss <= rssBound);
  push(`idle heap used, ${what}`, mib(idle.heapUsed), `≤ ${mib(HEAP_USED)}`, idle.heapUsed <= HEAP_USED);
  if (idle.commitsPer10s !== null) {
    push(`idle commits per 10 s, ${what}`, String(idle.commitsPer10s), `≤ ${IDLE_COMMITS_PER_10S}`, idle.commitsPer10s <= IDLE_COMMITS_PER_10S);
  }
}
