import { NativeConnection } from '@temporalio/worker';
import { loadConfigOrExit } from './config/config.ts';
import { describeDb, migrate, openOrm } from './db/orm.ts';
import { createRunWorker } from './engine/temporal/run-worker.ts';
import { TemporalEngine } from './engine/temporal/temporal-engine.ts';
import { createLogger } from './logger.ts';
import { loadOrCreateKey, Sealer } from './security/crypto.ts';
import { PostgresRunEventBus } from './services/events/pg-bus.ts';

/**
 * `npm run worker`: the Temporal worker process (ENGINE=temporal). It executes the run workflows
 * (workflows/) and their activities against the shared Postgres (DATABASE_URL), publishes run events
 * over LISTEN/NOTIFY so the API process's live tails see them, and runs the queue admission too (after
 * each run that ends, and periodically), so capacity freed by a finished run is used at once.
 * SIGTERM / SIGINT: stop polling, let running activities finish (Temporal retries what does not), exit.
 */

async function main(): Promise<void> {
  const config = loadConfigOrExit();
  const log = createLogger(config.logLevel);
  if (config.engine !== 'temporal') log.warn({ engine: config.engine }, 'the worker runs Temporal workflows; the API must run with ENGINE=temporal to use it');
  if (!config.databaseUrl) {
    console.error('the Temporal worker needs DATABASE_URL: the API and the worker share state through a Postgres server (embedded PGlite is single-process)');
    process.exit(2);
  }
  if (!config.encryptionKey) log.warn('ENCRYPTION_KEY is not set: the worker uses the key under DATA_DIR, which must be the API\'s key');

  const orm = await openOrm({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, preparedStatements: config.preparedStatements });
  const applied = await migrate(orm);
  if (applied.length) log.info({ migrations: applied }, 'migrations applied');
  const sealer = new Sealer(loadOrCreateKey(config.encryptionKey, config.dataDir));
  const bus = new PostgresRunEventBus({ connectionString: config.databaseUrl, log });
  await bus.connect().catch((err) => log.warn({ err }, 'run event bus not connected yet; it keeps trying'));
  const deps = { config, orm, log, sealer, bus, baseUrl: () => config.publicBaseUrl ?? `http://localhost:${config.port}/v1` };

  // Admission also runs here: every run that ends frees capacity for the next queued one.
  const engine = new TemporalEngine(deps);
  const connection = await connectWithRetry(config.temporal.address, log);
  const worker = await createRunWorker(deps, {
    connection,
    namespace: config.temporal.namespace,
    taskQueue: config.temporal.taskQueue,
    hooks: { onRunEnded: () => engine.admitSoon() },
  });
  await engine.start();
  log.info(
    { temporal: config.temporal, db: describeDb({ databaseUrl: config.databaseUrl, dataDir: config.dataDir }) },
    'temporal worker running',
  );

  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'worker shutting down');
    const force = setTimeout(() => process.exit(1), 30_000);
    force.unref();
    worker.shutdown();
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));

  try {
    await worker.run(); // resolves once shutdown() has drained the worker
  } finally {
    await engine.stop();
    await connection.close().catch(() => undefined);
    await bus.close();
    await orm.close(true);
  }
  log.info('worker stopped');
}

/** Temporal may come up after the worker (docker compose): retry for about a minute, then give up. */
async function connectWithRetry(address: string, log: ReturnType<typeof createLogger>): Promise<NativeConnection> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await NativeConnection.connect({ address });
    } catch (err) {
      if (attempt >= 30) throw err;
      log.warn({ err: String(err), address, attempt }, 'Temporal is not reachable yet; retrying');
      await new Promise((r) => setTimeout(r, 2_000));
    }
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
