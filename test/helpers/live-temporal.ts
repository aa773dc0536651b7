import { randomBytes, randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import pino from 'pino';
import { parseCatalog } from '../../src/catalog/parse-catalog.ts';
import { loadCatalog } from '../../src/catalog/load-catalog.ts';
import { readFileSync } from 'node:fs';
import { DEMO_CATALOG_FILE, loadConfig } from '../../src/config/config.ts';
import type { Orm } from '../../src/db/orm.ts';
import type { GraphNode } from '../../src/domain/graph/types.ts';
import { createRunWorker } from '../../src/engine/temporal/run-worker.ts';
import { TemporalEngine } from '../../src/engine/temporal/temporal-engine.ts';
import { Sealer } from '../../src/security/crypto.ts';
import { authenticateKey } from '../../src/services/auth/authenticate-key.ts';
import type { Deps } from '../../src/runs/deps.ts';
import { InProcessRunEventBus } from '../../src/services/events/bus.ts';
import { startRun } from '../../src/runs/start-run.ts';
import { resetDb } from './db.ts';
import { quietTemporalRuntime, workflowBundle } from '../temporal/support.ts';

/**
 * A live Temporal side for tests and the history recorder: the API's TemporalEngine and an in-process
 * worker (what `npm start` runs) on a private task queue of a real server, plus a plain Temporal client
 * for looking at executions (histories, visibility).
 */

export interface LiveHarness {
  deps: Deps;
  engine: TemporalEngine;
  client: Client;
  close(): Promise<void>;
}

const sealer = new Sealer(randomBytes(32));

/**
 * `inProcessWorker`: the engine runs the worker itself, as `npm start` does (eager starts on the shared
 * connection); by default the worker is separate, as with `npm run worker` beside an API process.
 */
export async function startLiveHarness(
  orm: Orm,
  address: string,
  env: Record<string, string> = {},
  keys: Sealer = sealer,
  opts: { inProcessWorker?: boolean } = {},
): Promise<LiveHarness> {
  quietTemporalRuntime();
  const bundle = await workflowBundle();
  const taskQueue = `live-${randomUUID()}`;
  const config = loadConfig({ CATALOG_FILE: 'none', LOG_LEVEL: 'silent', ...env, TEMPORAL_ADDRESS: address, TEMPORAL_TASK_QUEUE: taskQueue });
  const base = { config, orm, log: pino({ level: 'silent' }), sealer: keys, bus: new InProcessRunEventBus(), baseUrl: () => 'http://localhost:8080/v1' };
  const timing = { admissionIntervalMs: 200, sweepIntervalMs: 1_000, startGraceMs: 2_000 };
  const engine = new TemporalEngine(base, { ...timing, worker: opts.inProcessWorker === true });
  const separate = opts.inProcessWorker ? null : await startSeparateWorker(engine, base, bundle.code);
  await engine.start();
  const connection = await Connection.connect({ address });
  const client = new Client({ connection, namespace: config.temporal.namespace });
  return {
    deps: { ...base, engine },
    engine,
    client,
    async close() {
      await engine.stop();
      await separate?.close();
      await connection.close();
    },
  };
}

/** A worker of its own beside the engine, as `npm run worker` runs beside an API process. */
async function startSeparateWorker(engine: TemporalEngine, deps: Omit<Deps, 'engine'>, code: string): Promise<{ close(): Promise<void> }> {
  const { address, namespace, taskQueue } = deps.config.temporal;
  const native = await NativeConnection.connect({ address });
  const worker = await createRunWorker(deps, {
    connection: native,
    namespace,
    taskQueue,
    workflowBundle: { code },
    hooks: { onRunEnded: () => engine.admitSoon() },
    shutdownGraceTime: '2 seconds',
  });
  const running = worker.run();
  return {
    async close() {
      worker.shutdown();
      await running;
      await native.close();
    },
  };
}

export interface SeedOptions {
  credentialMode?: 'service_hosted' | 'byok';
  /** Account handle of the buyer (a fresh one per seed keeps visibility queries apart). */
  buyer?: string;
  /** The catalog workflow's compute limit (default: the service's). */
  computeLimitUsd?: string;
}

/** Empties the database and loads one catalog workflow with `nodes`, owned by alice, bought by `buyer`. */
export async function seedWorkflow(orm: Orm, nodes: GraphNode[], o: SeedOptions = {}): Promise<{ workflowId: string; buyer: string }> {
  await resetDb(orm);
  const workflowId = randomUUID();
  const buyer = o.buyer ?? 'bob';
  const catalog = {
    pricing: { stepUsd: '0.000100', models: { 'gpt-4o-mini': { input: '0.15', output: '0.60' } } },
    accounts: [
      { handle: 'alice', walletUsd: '10.000000' },
      { handle: buyer, walletUsd: '10.000000', apiKeys: [{ secret: 'wr_buyer_key', scopes: ['run:execute', 'run:read'], rateLimitPerMinute: 1000 }] },
    ],
    workflows: [
      {
        id: workflowId,
        owner: 'alice',
        name: 'Live Temporal',
        runModel: 'per_run',
        priceUsd: '0.250000',
        credentialMode: o.credentialMode ?? 'service_hosted',
        ...(o.computeLimitUsd ? { computeLimitUsd: o.computeLimitUsd } : {}),
        versions: [{ id: randomUUID(), label: 'v1', graph: { nodes } }],
      },
    ],
  };
  await loadCatalog(orm, parseCatalog(JSON.stringify(catalog), 'test'), { sealer });
  return { workflowId, buyer };
}

/** Empties the database and loads the demo catalog (catalog/demo.yaml): run as `wr_demo_key`. */
export async function seedDemoCatalog(orm: Orm): Promise<void> {
  await resetDb(orm);
  await loadCatalog(orm, parseCatalog(readFileSync(DEMO_CATALOG_FILE, 'utf8'), 'demo.yaml'), { sealer });
}

/** Starts a run of the seeded workflow as the buyer (or the key given), through the real start-run service; `cancelAfter`: its Cancel-After header. */
export async function startSeededRun(
  deps: Deps,
  workflowId: string,
  inputs: Record<string, unknown> = {},
  key = 'wr_buyer_key',
  cancelAfter?: string,
): Promise<string> {
  const principal = await authenticateKey(deps, `Bearer ${key}`);
  const { run } = await startRun(deps, principal, { body: { workflow: workflowId, inputs }, ...(cancelAfter ? { cancelAfterHeader: cancelAfter } : {}) });
  return run.id;
}

export async function runStatusOf(orm: Orm, runId: string): Promise<string> {
  const [r] = await orm.em.fork().execute<{ status: string }[]>('select status from runs where id = ?', [runId]);
  return String(r?.status);
}

/** Polls until `probe` answers truthy (a Temporal round trip under load may take seconds). */
export async function eventually<T>(what: string, probe: () => Promise<T | null | undefined | false>, timeoutMs = 30_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Waits until the run's workflow execution has closed (the engine starts it in the background: it may not exist yet). */
export async function workflowClosed(h: LiveHarness, runId: string): Promise<void> {
  const handle = h.client.workflow.getHandle(runId);
  await eventually(`workflow ${runId} closed`, async () => (await handle.describe().catch(() => null))?.status.name.match(/^(COMPLETED|CANCELLED|FAILED)$/));
}
