import { fileURLToPath } from 'node:url';
import { createApp, type App } from '../../src/app.ts';
import { loadConfig } from '../../src/config/config.ts';
import type { EnginePort } from '../../src/runs/engine-port.ts';
import type { Logger } from '../../src/logger.ts';
import { NullEngine } from '../../src/runs/engine-port.ts';
import type { Deps } from '../../src/runs/deps.ts';
import { resetDb, testOrm } from './db.ts';
import { assertMatchesContract, contractReady } from './openapi-contract.ts';

export const REST_CATALOG = fileURLToPath(new URL('../fixtures/rest-catalog.yaml', import.meta.url));

export interface TestApp {
  app: App;
  deps: Deps;
  url: string;
  /** Where the tests send requests (the bound address). */
  base: string;
  /** The prefix the service puts in absolute URLs (PUBLIC_BASE_URL or http://localhost:PORT/v1). */
  publicBase: string;
  call: (method: string, path: string, opts?: CallOptions) => Promise<CallResult>;
  close: () => Promise<void>;
}

export interface CallOptions {
  key?: string | null;
  body?: unknown;
  /** Sent as is (for invalid JSON and the like). */
  rawBody?: string;
  headers?: Record<string, string>;
  /** Skip the OpenAPI response check (only for deliberately off-contract probes). */
  unchecked?: boolean;
}

export interface CallResult {
  status: number;
  headers: Headers;
  text: string;
  body: any;
}

/**
 * A real HTTP server over the shared test database, reset and loaded with a catalog. Every response
 * the tests receive through `call` is checked against openapi/openapi.yaml.
 */
export async function startTestApp(
  opts: {
    catalog?: string | null;
    env?: Record<string, string>;
    /**
     * The engine: a factory, or `'app'` for the one the app builds from its configuration (ENGINE=temporal
     * then runs a TemporalEngine with its in-process worker). Default: a NullEngine (runs stay queued).
     */
    engine?: ((deps: Omit<Deps, 'engine'>) => EnginePort | Promise<EnginePort>) | 'app';
    /** The service's logger (default: built from LOG_LEVEL, silent); tests capture logs with it. */
    log?: Logger;
  } = {},
): Promise<TestApp> {
  await contractReady();
  const orm = await testOrm();
  await resetDb(orm);
  const config = loadConfig({
    PORT: '0',
    CATALOG_FILE: opts.catalog === null ? 'none' : (opts.catalog ?? REST_CATALOG),
    LOG_LEVEL: 'silent',
    DATA_DIR: '.tmp/test-data',
    INTERNAL_API_TOKEN: 'test-internal-token-123456',
    // The app sees the database it really runs on (what it shares with other processes depends on it).
    ...(process.env.DATABASE_URL ? { DATABASE_URL: process.env.DATABASE_URL } : {}),
    ...opts.env,
  });
  const app = await createApp({ config, orm, log: opts.log, engine: opts.engine === 'app' ? undefined : (opts.engine ?? (() => new NullEngine())) });
  const url = await app.listen();
  const base = `${url}/v1`;
  const call = async (method: string, path: string, o: CallOptions = {}): Promise<CallResult> => {
    const headers: Record<string, string> = { ...o.headers };
    const key = o.key === undefined ? 'wr_test_bob' : o.key;
    if (key !== null) headers.authorization ??= `Bearer ${key}`;
    let body: string | undefined = o.rawBody;
    if (o.body !== undefined) {
      body = JSON.stringify(o.body);
      headers['content-type'] ??= 'application/json';
    }
    const res = await fetch(path.startsWith('http') ? path : `${base}${path}`, { method, headers, body });
    const text = await res.text();
    let parsed: unknown = undefined;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    const result = { status: res.status, headers: res.headers, text, body: parsed };
    if (!o.unchecked) assertMatchesContract(method, new URL(path.startsWith('http') ? path : `${base}${path}`).pathname, result);
    return result;
  };
  return { app, deps: app.deps, url, base, publicBase: app.deps.baseUrl(), call, close: () => app.close() };
}

/**
 * Another service process on the same database as the test app, as a second `npm start` would be
 * (its own HTTP server, bus and limiter; no catalog load, no reset). For the scale-out tests.
 */
export async function startPeerApp(
  engine: (deps: Omit<Deps, 'engine'>) => EnginePort | Promise<EnginePort> = () => new NullEngine(),
  env: Record<string, string> = {},
): Promise<{ app: App; base: string }> {
  const config = loadConfig({
    PORT: '0',
    CATALOG_FILE: 'none',
    LOG_LEVEL: 'silent',
    DATA_DIR: '.tmp/test-data',
    INTERNAL_API_TOKEN: 'test-internal-token-123456',
    ...(process.env.DATABASE_URL ? { DATABASE_URL: process.env.DATABASE_URL } : {}),
    ...env,
  });
  const app = await createApp({ config, orm: await testOrm(), engine });
  return { app, base: `${await app.listen()}/v1` };
}
