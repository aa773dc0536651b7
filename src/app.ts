import { readFile } from 'node:fs/promises';
import { baseUrl, type Config } from './config/config.ts';
import { describeDb, migrate, openOrm, type Orm } from './db/orm.ts';
import type { EnginePort } from './runs/engine-port.ts';
import { createLogger, type Logger } from './logger.ts';
import { HttpServer } from './http/server.ts';
import { assertPortFree, listenError } from './http/port-check.ts';
import { mountDocs } from './http/docs/mount-docs.ts';
import { mountHealth } from './http/health.ts';
import { mountRest } from './http/rest/rest-adapter.ts';
import { mountGraphqlOnDemand } from './graphql/on-demand.ts';
import { loadOrCreateKey, Sealer } from './security/crypto.ts';
import { InProcessRunEventBus } from './services/events/bus.ts';
import { createStreamSlots } from './runs/stream-slots.ts';
import { WebhookDispatcher } from './services/webhooks/webhook-dispatcher.ts';
import { IdempotencySweeper } from './runs/idempotency-sweeper.ts';
import type { Deps } from './runs/deps.ts';
import { parseCatalog } from './catalog/parse-catalog.ts';
import { loadCatalog } from './catalog/load-catalog.ts';
import { setMetricsEnabled } from './observability/metrics.ts';
import { createMetricsEndpoint } from './http/metrics-server.ts';
import { readQueueSnapshot } from './runs/queue-snapshot.ts';
import { drain } from './drain.ts';

/**
 * The composition root: opens the database, applies migrations, loads the catalog, builds the service
 * dependencies, the engine and the HTTP adapters. Nothing else constructs these.
 */

export interface AppOptions {
  config: Config;
  /** Reuse an open database (tests share one); the app then does not close it. */
  orm?: Orm;
  log?: Logger;
  /** Builds the engine once the dependencies exist; defaults to the engine named by config. */
  engine?: (deps: Omit<Deps, 'engine'>) => EnginePort | Promise<EnginePort>;
}

export interface App {
  deps: Deps;
  http: HttpServer;
  /** With METRICS_PORT, the metrics server's URL root once listening; else null (/metrics is on the API port). */
  readonly metricsUrl: string | null;
  /** The sweep of expired idempotency records, started by listen(). */
  idempotency: IdempotencySweeper;
  /** Starts the engine, then listens on config PORT/HOST; returns the bound URL root (http://host:port). */
  listen(): Promise<string>;
  /** The drain (src/drain.ts), bounded by SHUTDOWN_GRACE_SECONDS, then the database closed. */
  close(): Promise<void>;
}

export async function createApp(opts: AppOptions): Promise<App> {
  const { config } = opts;
  const log = opts.log ?? createLogger(config.logLevel);
  const ownsOrm = !opts.orm;
  // Before any migration or catalog load: a taken port is one line, not a stack trace after the work.
  if (ownsOrm) await assertPortFree(config.port, config.host);
  const orm =
    opts.orm ??
    (await openOrm({
      databaseUrl: config.databaseUrl,
      dataDir: config.dataDir,
      preparedStatements: config.preparedStatements,
      lockAs: { role: 'npm start', port: config.port },
    }));
  const applied = await migrate(orm);
  if (applied.length) log.info({ migrations: applied.length, last: applied.at(-1) }, 'migrations applied');

  const sealer = new Sealer(loadOrCreateKey(config.encryptionKey, config.dataDir));
  if (config.catalogFile) {
    const text = await readFile(config.catalogFile, 'utf8');
    const report = await loadCatalog(orm, parseCatalog(text, config.catalogFile), { sealer });
    // One summary line; `npm run catalog -- load FILE` prints the per-kind report.
    log.info({ catalog: config.catalogFile, created: report.created, updated: report.updated, unchanged: report.unchanged }, 'catalog loaded');
  }

  let boundPort = config.port;
  // On a Postgres server any process may write a run's events (another API process's embedded engine,
  // a Temporal worker), so live tails here hear of them over LISTEN/NOTIFY (src/services/events/pg-bus.ts).
  const bus = config.databaseUrl
    ? new (await import('./services/events/pg-bus.ts')).PostgresRunEventBus({ connectionString: config.databaseUrl, log })
    : new InProcessRunEventBus();
  const webhooks = new WebhookDispatcher({ config, orm, log, sealer });
  const idempotency = new IdempotencySweeper({ orm, log });
  const streams = createStreamSlots({ orm, limit: config.maxStreamsPerKey, shared: config.databaseUrl !== undefined, log });
  const base: Omit<Deps, 'engine'> = {
    config,
    orm,
    log,
    sealer,
    bus,
    baseUrl: () => (config.publicBaseUrl ? baseUrl(config) : `http://localhost:${boundPort}/v1`),
    webhooks,
    streams,
  };
  const engine = opts.engine ? await opts.engine(base) : await defaultEngine(base);
  const deps: Deps = { ...base, engine };

  const http = new HttpServer(log, config.http);
  // From the first moment of a shutdown /readyz answers 503 (the drain: src/drain.ts).
  let draining = false;
  mountHealth(http, deps, () => !draining);
  if (!config.metrics.enabled) setMetricsEnabled(false);
  const queue = { read: () => readQueueSnapshot({ orm }), capacity: config.runCapacity };
  const metrics = config.metrics.enabled ? createMetricsEndpoint({ queue, port: config.metrics.port, host: config.host, http, log }) : null;
  let metricsUrl: string | null = null;
  mountDocs(http, () => new URL(deps.baseUrl()).origin);
  await mountAdapters(http, deps);

  let closed = false;
  return {
    deps,
    http,
    idempotency,
    get metricsUrl() {
      return metricsUrl;
    },
    async listen() {
      // Ready only when ready: the engine (with an in-process worker, the worker) runs before the port
      // opens, so the first request already finds runs admitted at once (docs/operations.md#start-and-stop).
      await engine.start();
      const { port, host } = await http.listen(config.port, config.host).catch(async (err: NodeJS.ErrnoException) => {
        await engine.stop();
        throw listenError(err, config.port, config.host);
      });
      boundPort = port;
      metricsUrl =
        (await metrics?.listen().catch((err: NodeJS.ErrnoException) => {
          throw listenError(err, config.metrics.port ?? 0, config.host, 'METRICS_PORT');
        })) ?? null;
      webhooks.start();
      idempotency.start();
      log.info(
        {
          url: `http://${host}:${port}`,
          db: describeDb({ databaseUrl: config.databaseUrl, dataDir: config.dataDir }),
          engine: engine.name,
          ...(metricsUrl ? { metrics: `${metricsUrl}/metrics` } : {}),
        },
        'listening',
      );
      return `http://${host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host}:${port}`;
    },
    async close() {
      if (closed) return;
      closed = true;
      draining = true;
      await drain({ log, graceMs: config.shutdownGraceMs, http, engine, webhooks, background: [idempotency, streams] });
      await metrics?.close();
      await bus.close();
      if (ownsOrm) await orm.close(true);
    },
  };
}

async function defaultEngine(deps: Omit<Deps, 'engine'>): Promise<EnginePort> {
  if (deps.config.engine === 'embedded') {
    const { EmbeddedEngine } = await import('./engine/embedded/embedded-engine.ts');
    return new EmbeddedEngine(deps);
  }
  // ENGINE=temporal: the client side, plus a worker in this process unless TEMPORAL_WORKER=off
  // (then `npm run worker` processes execute the runs; they need the same Postgres server).
  const { worker } = deps.config.temporal;
  if (!worker && !deps.config.databaseUrl) {
    deps.log.warn('TEMPORAL_WORKER=off on embedded PGlite: a worker in another process cannot reach this database; set DATABASE_URL');
  }
  const { TemporalEngine } = await import('./engine/temporal/temporal-engine.ts');
  return new TemporalEngine(deps, { worker });
}

/** REST and GraphQL adapters register themselves here as they land; GraphQL is built by its first request. */
async function mountAdapters(http: HttpServer, deps: Deps): Promise<void> {
  await mountRest(http, deps);
  mountGraphqlOnDemand(http, deps);
}
