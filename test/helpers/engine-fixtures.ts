import { randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { loadCatalog } from '../../src/catalog/load-catalog.ts';
import { parseCatalog } from '../../src/catalog/parse-catalog.ts';
import { loadConfig } from '../../src/config/config.ts';
import type { Orm } from '../../src/db/orm.ts';
import { EmbeddedEngine } from '../../src/engine/embedded/embedded-engine.ts';
import type { Deps } from '../../src/runs/deps.ts';
import type { Sealer } from '../../src/security/crypto.ts';
import { InProcessRunEventBus } from '../../src/services/events/bus.ts';
import { resetDb } from './db.ts';

/** What the engine tests run against: a server that never answers, and a catalog of one buyer. */

/** An HTTP server that never answers: a step calling it keeps its run running. */
export async function hangingServer(): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer(() => undefined);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  return {
    url,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/**
 * Empties the database and loads `workflows` (per run, $0.25, one version each, owned by alice) and a
 * buyer with $10, the API key `key` (both run scopes, 1,000 requests a minute) and a webhook endpoint.
 */
export async function seedBuyerCatalog(orm: Orm, sealer: Sealer, key: string, workflows: { id: string; name: string; nodes: unknown[] }[]): Promise<void> {
  await resetDb(orm);
  const catalog = {
    pricing: { stepUsd: '0.000100' },
    accounts: [
      { handle: 'alice', walletUsd: '10.000000' },
      {
        handle: 'buyer',
        walletUsd: '10.000000',
        apiKeys: [{ secret: key, scopes: ['run:execute', 'run:read'], rateLimitPerMinute: 1000 }],
        webhooks: [{ url: 'https://example.test/hooks', secret: `whsec_${randomBytes(24).toString('base64')}` }],
      },
    ],
    workflows: workflows.map(({ id, name, nodes }) => ({
      id,
      owner: 'alice',
      name,
      runModel: 'per_run',
      priceUsd: '0.250000',
      versions: [{ id: randomUUID(), label: 'v1', graph: { nodes } }],
    })),
  };
  await loadCatalog(orm, parseCatalog(JSON.stringify(catalog), 'engine-test'), { sealer });
}

/** What an engine under test is built on (no engine yet): config from `env` over a silent, catalog-less base. */
export function engineDeps(orm: Orm, sealer: Sealer, env: Record<string, string> = {}) {
  const config = loadConfig({ CATALOG_FILE: 'none', LOG_LEVEL: 'silent', ...env });
  return { config, orm, log: pino({ level: 'silent' }), sealer, bus: new InProcessRunEventBus(), baseUrl: () => 'http://localhost:8080/v1' };
}

/** The engine tests' embedded engine clocks: a lease, a sweep and a stop short enough for a test's waits. */
export const QUICK_EMBEDDED = { leaseTtlMs: 1_000, sweepIntervalMs: 200, stopTimeoutMs: 2_000 };

/** `use` with an embedded engine (QUICK_EMBEDDED) on `base`, started before it and stopped after it, whatever it does. */
export async function withEmbeddedEngine<T>(base: ReturnType<typeof engineDeps>, use: (deps: Deps) => Promise<T>): Promise<T> {
  const engine = new EmbeddedEngine(base, QUICK_EMBEDDED);
  await engine.start();
  try {
    return await use({ ...base, engine });
  } finally {
    await engine.stop();
  }
}
