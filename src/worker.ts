import { ConfigError, loadConfigOrExit } from './config/config.ts';
import { describeDb, migrate, openOrm } from './db/orm.ts';
import { TemporalEngine } from './engine/temporal/temporal-engine.ts';
import { createLogger } from './logger.ts';
import { startTracing, stopTracing } from './observability/tracing.ts';
import { loadOrCreateKey, Sealer } from './security/crypto.ts';
import { PostgresRunEventBus } from './services/events/pg-bus.ts';
import { setMetricsEnabled } from './observability/metrics.ts';
import { createMetricsEndpoint } from './http/metrics-server.ts';
import { readQueueSnapshot } from './runs/queue-snapshot.ts';

/**
 * `npm run worker`: a Temporal worker process and nothing else (ENGINE=temporal, for scale-out; `npm
 * start` runs one in its own process too unless TEMPORAL_WORKER=off). It executes the run workflows
 * (workflows/) and their activities against the shared Postgres (DATABASE_URL), publishes run events
 * over LISTEN/NOTIFY so the API processes' live tails see them, and runs the queue admission too
 * (after each run that ends, and periodically), so capacity freed by a finished run is used at once.
 * SIGTERM / SIGINT: stop polling, let running activities finish (Temporal retries what does not), exit.
 */

async function main(): Promise<void> {
  const config = loadConfigOrExit();
  const log = createLogger(config.logLevel);
  await startTracing(log); // only when an OTEL_EXPORTER_OTLP_*ENDPOINT is set (docs/tracing.md)
  if (config.engine !== 'temporal') log.warn({ engine: config.engine }, 'the worker runs Temporal workflows; the API must run with ENGINE=temporal to use it');
  if (!config.databaseUrl) {
    console.error(
      'the Temporal worker needs DATABASE_URL: the API and the worker share state through a Postgres server ' +
        '(embedded PGlite is single-process; `ENGINE=temporal npm start` runs a worker in its own process)',
    );
    process.exit(2);
  }
  if (!config.encryptionKey) log.warn("ENCRYPTION_KEY is not set: the worker uses the key under DATA_DIR, which must be the API's key");

  const orm = await openOrm({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, preparedStatements: config.preparedStatements });
  const applied = await migrate(orm);
  if (applied.length) log.info({ migrations: applied }, 'migrations applied');
  const sealer = new Sealer(loadOrCreateKey(config.encryptionKey, config.dataDir));
  const bus = new PostgresRunEventBus({ connectionString: config.databaseUrl, log });
  await bus.connect().catch((err) => log.warn({ err }, 'run event bus not connected yet; it keeps trying'));
  const deps = { config, orm, log, sealer, bus, baseUrl: () => config.publicBaseUrl ?? `http://localhost:${config.port}/v1` };

  if (!config.metrics.enabled) setMetricsEnabled(false);
  // The engine with its worker: admission also runs here, as every run that ends frees capacity.
  // A worker that stopped by itself leaves nothing to do here: exit, so a supervisor starts a new one.
  const engine = new TemporalEngine(deps, { worker: true, onWorkerFailed: () => process.exit(1) });
  await engine.start(); // waits for Temporal a bounded time (TEMPORAL_CONNECT_ATTEMPTS)
  // This process has no API port: its own series (steps, runs finished, webhooks, pool) only with METRICS_PORT.
  const queue = { read: () => readQueueSnapshot({ orm }), capacity: config.runCapacity };
  const metrics =
    config.metrics.enabled && config.metrics.port !== undefined ? createMetricsEndpoint({ queue, port: config.metrics.port, host: config.host, log }) : null;
  const metricsUrl = await metrics?.listen();
  log.info(
    {
      temporal: { address: config.temporal.address, namespace: config.temporal.namespace, taskQueue: config.temporal.taskQueue },
      db: describeDb({ databaseUrl: config.databaseUrl, dataDir: config.dataDir }),
      ...(metricsUrl ? { metrics: `${metricsUrl}/metrics` } : {}),
    },
    'temporal worker running',
  );

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'worker shutting down');
    const force = setTimeout(() => process.exit(1), 30_000);
    force.unref();
    try {
      await engine.stop(); // drains the worker: running activities get their grace time
      await metrics?.close();
      await bus.close();
      await orm.close(true);
      await stopTracing();
      log.info('worker stopped');
      process.exit(0);
    } catch (err) {
      log.error({ err }, 'worker shutdown failed');
      process.exit(1);
    }
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
}

main().catch((err) => {
  if (err instanceof ConfigError) {
    console.error(err.message);
    process.exit(2);
  }
  console.error(err);
  process.exit(1);
});
