import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Session } from 'node:inspector/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { createApp } from '../src/app.ts';
import { loadConfig } from '../src/config/config.ts';
import { openOrm } from '../src/db/orm.ts';
import { observeQueryLog } from '../src/db/query-log.ts';
import { NullEngine } from '../src/runs/engine-port.ts';
import { createLogger } from '../src/logger.ts';
import { observeResponse, runAccepted, setMetricsEnabled } from '../src/observability/metrics.ts';
import { hashApiKey } from '../src/security/crypto.ts';
import { appendRunEvents } from '../src/runs/fenced-write.ts';
import { fork } from '../src/runs/deps.ts';
import { startFloor } from './floor.ts';
import { summariseProfile, type CpuProfile } from './profile.ts';
import {
  BENCH_ACCOUNT_ID,
  BENCH_ENCRYPTION_KEY,
  BENCH_KEY,
  sqlKind,
  VERSION_3,
  wallNow,
  WORKFLOW_3,
  type ChildMessage,
  type ChildOptions,
  type Command,
  type MemoryStats,
  type StepStats,
} from './shared.ts';

/**
 * The server under test, in its own process (forked by bench/run.ts) so the load generator never shares
 * its event loop and its memory can be measured alone: the app from `createApp` (NullEngine, the
 * default embedded engine, or ENGINE=temporal with its in-process worker, whose activities publish on
 * this process's bus), plus the floor server (bench/floor.ts) on another port over the same
 * database. It answers the driver's commands over IPC: step boundaries (CPU, event-loop delay, SQL
 * statement counts), memory after GC, CPU profiles, live events for the stream benchmark, and
 * notifications of tracked runs that reached a terminal state.
 */

const opts = JSON.parse(process.env.BENCH_CHILD ?? '{}') as ChildOptions;
const send = (m: ChildMessage) => process.send!(m);
const CATALOG = fileURLToPath(new URL('./catalog.yaml', import.meta.url));
/** Statements of the harness itself carry this comment and are not counted. */
const HARNESS = '/* bench */';

async function main(): Promise<void> {
  // The bench catalog, plus the generated stream keys (the per-key concurrent stream limit).
  let catalogFile = CATALOG;
  if (opts.extraKeys.length || opts.extraAccounts.length) {
    const doc = parseYaml(readFileSync(CATALOG, 'utf8')) as { accounts: Record<string, unknown>[] };
    const main = doc.accounts[0] as { apiKeys: unknown[]; walletUsd: string };
    const key = (secret: string) => ({ secret, scopes: ['run:read', 'run:execute'], rateLimitPerMinute: 1000000 });
    for (const secret of opts.extraKeys) main.apiKeys.push(key(secret));
    opts.extraAccounts.forEach((secret, i) => doc.accounts.push({ handle: `bench-${i + 1}`, walletUsd: main.walletUsd, apiKeys: [key(secret)] }));
    catalogFile = join(mkdtempSync(join(tmpdir(), 'wr-bench-catalog-')), 'catalog.yaml');
    writeFileSync(catalogFile, stringifyYaml(doc));
  }
  const config = loadConfig({
    PORT: '0',
    HOST: '127.0.0.1',
    CATALOG_FILE: catalogFile,
    DATA_DIR: opts.dataDir,
    ...(opts.databaseUrl ? { DATABASE_URL: opts.databaseUrl } : {}),
    RUN_CAPACITY: String(opts.runCapacity),
    ...(opts.engine === 'temporal' && opts.temporal
      ? { ENGINE: 'temporal', TEMPORAL_ADDRESS: opts.temporal.address, TEMPORAL_TASK_QUEUE: opts.temporal.taskQueue, TEMPORAL_WORKER: 'on' }
      : {}),
    ENCRYPTION_KEY: BENCH_ENCRYPTION_KEY,
    INTERNAL_API_TOKEN: 'bench-internal-token-0123456789',
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
  });
  const log = createLogger(config.logLevel);

  // The service's own ORM setup (src/db/orm.ts); opened here only to count its statements.
  const orm = await openOrm({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, preparedStatements: config.preparedStatements });
  const sql = {
    mode: 'off' as 'off' | 'count' | 'kinds',
    statements: 0,
    byKind: new Map<string, number>(),
    msByKind: new Map<string, number>(),
    slowest: [] as [number, string][],
  };
  // Statement texts are constant (src/sql): their kind is worked out once, so the profiled step's
  // counting does not show up in its own profile.
  const kinds = new Map<string, string>();
  const kindOf = (q: string): string => {
    let k = kinds.get(q);
    if (k === undefined) {
      k = sqlKind(q);
      if (kinds.size < 5_000) kinds.set(q, k);
    }
    return k;
  };
  observeQueryLog(orm, (ctx) => {
    if (sql.mode !== 'off' && !ctx.query.includes(HARNESS)) {
      sql.statements++;
      if (sql.mode === 'kinds') {
        const k = kindOf(ctx.query);
        sql.byKind.set(k, (sql.byKind.get(k) ?? 0) + 1);
        sql.msByKind.set(k, (sql.msByKind.get(k) ?? 0) + (ctx.took ?? 0));
        if ((ctx.took ?? 0) > (sql.slowest[2]?.[0] ?? 0)) {
          sql.slowest.push([ctx.took!, k]);
          sql.slowest.sort((a, b) => b[0] - a[0]).splice(3);
        }
      }
    }
  });

  const app = await createApp({ config, orm, log, engine: opts.engine === 'null' ? () => new NullEngine() : undefined });
  const appUrl = await app.listen();
  const deps = app.deps;
  const harness = () => fork(deps);

  // Tracked runs (end-to-end; only when asked, opts.track): every accepted run is tracked. The engine announces a terminal transition
  // as a bus notification immediately followed by the webhook dispatcher's notify() (publishTerminal in
  // src/runs/fenced-write.ts): that run is checked at once. Every other notified run is checked by a
  // slow sweep (100 ms), in case a terminal transition is announced differently. One batched query each.
  // On a Postgres server the check has its own connection, so it never queues for the service's pool
  // (which a saturated engine keeps busy); PGlite has one connection, shared with the service.
  let terminalOf: (ids: string[]) => Promise<{ id: string; status: string }[]>;
  let checker: pg.Client | null = null;
  if (config.databaseUrl && opts.engine !== 'null' && opts.track) {
    checker = new pg.Client({ connectionString: config.databaseUrl });
    await checker.connect();
    const c = checker;
    terminalOf = async (ids) =>
      (
        await c.query<{ id: string; status: string }>(
          `select id, status from runs where id = any($1::uuid[]) and status in ('completed', 'failed', 'cancelled')`,
          [ids],
        )
      ).rows;
  } else {
    terminalOf = (ids) =>
      harness().execute<{ id: string; status: string }[]>(
        `select ${HARNESS} id, status from runs where id in (?) and status in ('completed', 'failed', 'cancelled')`,
        [ids],
      );
  }
  const tracked = new Set<string>();
  const urgent = new Set<string>();
  const dirty = new Set<string>();
  let fastTimer: NodeJS.Timeout | undefined;
  let slowTimer: NodeJS.Timeout | undefined;
  let checking: Promise<void> | null = null;
  const check = async (ids: string[]) => {
    while (checking) await checking;
    if (!ids.length) return;
    let release!: () => void;
    checking = new Promise<void>((r) => (release = r));
    try {
      const rows = await terminalOf(ids);
      const done = rows.filter((r) => tracked.delete(String(r.id))).map((r) => ({ id: String(r.id), status: String(r.status) }));
      for (const r of done) dirty.delete(r.id);
      if (done.length) send({ type: 'terminal', runs: done });
    } catch (err) {
      log.error({ err }, 'bench: terminal check failed');
    } finally {
      checking = null;
      release();
    }
  };
  const checkUrgent = () => {
    fastTimer ??= setTimeout(() => {
      fastTimer = undefined;
      const ids = [...urgent];
      urgent.clear();
      void check(ids);
    }, 1);
  };
  const checkDirty = () => {
    slowTimer ??= setTimeout(() => {
      slowTimer = undefined;
      const ids = [...dirty].filter((id) => tracked.has(id));
      dirty.clear();
      void check(ids);
    }, 100);
  };
  if (opts.engine !== 'null' && opts.track) {
    const bus = deps.bus;
    const publish = bus.publish.bind(bus);
    let lastPublished: string | null = null;
    // The acceptance publishes nothing (nobody can follow a run before its id is answered): a run is
    // tracked from its first publish.
    const seen = new Set<string>();
    bus.publish = (runId, lastSequence, events) => {
      publish(runId, lastSequence, events);
      if (!seen.has(runId)) {
        seen.add(runId);
        tracked.add(runId);
      }
      if (!tracked.has(runId)) return;
      // Any publish may be the terminal one (a run executed in memory publishes once, when it is
      // finished and settled): check it at once.
      urgent.add(runId);
      checkUrgent();
      dirty.add(runId);
      checkDirty();
      lastPublished = runId;
      queueMicrotask(() => (lastPublished = null));
    };
    const webhooks = deps.webhooks;
    if (webhooks) {
      const notify = webhooks.notify.bind(webhooks);
      webhooks.notify = () => {
        notify();
        if (lastPublished) {
          urgent.add(lastPublished);
          checkUrgent();
        }
      };
    }
  }

  // When each run's events were published (after their commit, before any reader is told), for the
  // streams part's published → received latency: run id → [last sequence, wall ms, …].
  let published = new Map<string, number[]>();
  if (opts.publishTimes) {
    const bus = deps.bus;
    const publish = bus.publish.bind(bus);
    bus.publish = (runId, lastSequence, events) => {
      const at = wallNow();
      let times = published.get(runId);
      if (!times) published.set(runId, (times = []));
      times.push(lastSequence, at);
      publish(runId, lastSequence, events);
    };
  }

  let floor: Awaited<ReturnType<typeof startFloor>> | null = null;
  if (opts.floor) {
    const [key] = await harness().execute<{ id: string }[]>(`select ${HARNESS} id from api_keys where key_hash = ?`, [hashApiKey(BENCH_KEY)]);
    floor = await startFloor({
      orm,
      databaseUrl: config.databaseUrl,
      accountId: BENCH_ACCOUNT_ID,
      apiKeyId: String(key!.id),
      workflowId: WORKFLOW_3,
      versionId: VERSION_3,
      displayedPriceUsd: '0.000300',
      stepUsd: '0.000100',
      computeLimitUsd: config.computeLimitUsd,
      sseHeartbeatMs: config.sseHeartbeatMs,
    });
  }

  const eld = monitorEventLoopDelay({ resolution: 5 });
  eld.enable();
  let step = { t: 0, cpu: process.cpuUsage() };
  let session: Session | null = null;

  const memory = async (): Promise<MemoryStats> => {
    const gc = (globalThis as { gc?: () => void }).gc;
    for (let i = 0; i < 3; i++) {
      gc?.();
      await new Promise((r) => setTimeout(r, 50));
    }
    const m = process.memoryUsage();
    return { heapUsed: m.heapUsed, heapTotal: m.heapTotal, rss: m.rss, external: m.external, arrayBuffers: m.arrayBuffers };
  };

  const handlers: { [K in Command['cmd']]: (c: Extract<Command, { cmd: K }>) => Promise<unknown> | unknown } = {
    metrics: (c) => {
      setMetricsEnabled(c.on);
      return null;
    },
    metricsMicro: (c) => {
      // What the instrumentation does for one POST /runs, through the real functions: the request's
      // timer, its histogram observation and the accepted-runs counter.
      const req = { method: 'POST' } as IncomingMessage;
      const res = { writableEnded: true, destroyed: false, statusCode: 202 } as ServerResponse;
      const route = '/v1/runs';
      const loop = (on: boolean) => {
        setMetricsEnabled(on);
        const t = process.cpuUsage();
        for (let i = 0; i < c.n; i++) {
          observeResponse(req, res, performance.now(), route);
          runAccepted();
        }
        const u = process.cpuUsage(t);
        return (u.user + u.system) / c.n;
      };
      loop(true); // warm up
      const on = loop(true);
      const off = loop(false);
      setMetricsEnabled(true);
      return { on, off };
    },
    stepStart: (c) => {
      sql.mode = c.countSql === true ? 'kinds' : 'count';
      sql.statements = 0;
      sql.byKind.clear();
      sql.msByKind.clear();
      sql.slowest = [];
      eld.reset();
      step = { t: performance.now(), cpu: process.cpuUsage() };
      return null;
    },
    stepEnd: (): StepStats => {
      const cpu = process.cpuUsage(step.cpu);
      const out: StepStats = {
        wallMs: performance.now() - step.t,
        cpuMs: (cpu.user + cpu.system) / 1000,
        eventLoopDelay: { p50: eld.percentile(50) / 1e6, p99: eld.percentile(99) / 1e6, max: eld.max / 1e6 },
        sql: {
          statements: sql.statements,
          byKind: Object.fromEntries([...sql.byKind.entries()].sort((a, b) => b[1] - a[1])),
          msByKind: Object.fromEntries([...sql.msByKind.entries()].sort((a, b) => b[1] - a[1])),
          slowest: sql.slowest,
        },
      };
      sql.mode = 'off';
      return out;
    },
    memory: () => memory(),
    appendLive: async (c) => {
      const written = await harness().transactional((tx) =>
        appendRunEvents(tx, c.runId, [{ type: 'node.output.delta', nodeId: 'bench', data: { text: c.marker } }]),
      );
      const t = wallNow();
      deps.bus.publish(c.runId, written.last, written.events);
      return t;
    },
    floorBroadcast: (c) => floor!.broadcast(c.marker),
    clock: () => wallNow(),
    publishes: () => {
      const out = Object.fromEntries(published);
      published = new Map();
      return out;
    },
    profileStart: async () => {
      session = new Session();
      session.connect();
      await session.post('Profiler.enable');
      await session.post('Profiler.setSamplingInterval', { interval: 200 });
      await session.post('Profiler.start');
      return null;
    },
    profileStop: async () => {
      const { profile } = (await session!.post('Profiler.stop')) as { profile: CpuProfile };
      session!.disconnect();
      session = null;
      const file = join(mkdtempSync(join(tmpdir(), 'wr-bench-profile-')), 'server.cpuprofile');
      writeFileSync(file, JSON.stringify(profile));
      return { summary: summariseProfile(profile), file };
    },
    sql: async (c) => harness().execute(`${HARNESS} ${c.text}`, c.params ?? []),
    close: async () => {
      await checker?.end();
      await floor?.close();
      await app.close();
      await orm.close(true);
      setTimeout(() => process.exit(0), 10);
      return null;
    },
  };

  process.on('message', (raw) => {
    const c = raw as Command;
    Promise.resolve()
      .then(() => (handlers[c.cmd] as (c: Command) => unknown)(c))
      .then(
        (value) => send({ type: 'reply', id: c.id, ok: true, value }),
        (err: unknown) => send({ type: 'reply', id: c.id, ok: false, error: err instanceof Error ? (err.stack ?? err.message) : String(err) }),
      );
  });
  process.on('disconnect', () => process.exit(0));

  send({ type: 'ready', appUrl, floorUrl: floor?.url ?? null, pid: process.pid, floorDriver: floor?.driver ?? null });
}

main().catch((err) => {
  console.error('bench server failed to start:', err);
  process.exit(1);
});
