import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';

/**
 * Every environment variable the service reads is parsed here, once, so a bad value fails the start
 * with a message that names the variable instead of surfacing later as a confusing runtime error.
 */

export const DEMO_CATALOG_FILE = fileURLToPath(new URL('../../catalog/demo.yaml', import.meta.url));

const flag = z
  .enum(['1', '0', 'true', 'false', ''])
  .optional()
  .transform((v) => v === '1' || v === 'true');
/** A flag that is on unless set to 0 or false. */
const flagOn = z
  .enum(['1', '0', 'true', 'false', ''])
  .optional()
  .transform((v) => v !== '0' && v !== 'false');
const int = (min: number, max = Number.MAX_SAFE_INTEGER) =>
  z.string().trim().regex(/^\d+$/, 'must be a whole number').transform(Number).pipe(z.number().int().min(min).max(max));
const decimal = z
  .string()
  .trim()
  .regex(/^\d+(\.\d{1,6})?$/, 'must be a decimal amount with at most 6 places');

/** MAX_STREAMS_PER_KEY when unset. */
export const DEFAULT_MAX_STREAMS_PER_KEY = 1000;

/** How long a request may take to arrive, and how long an idle keep-alive connection is kept (src/http/server.ts). */
export interface HttpLimits {
  /** From a request's first byte to the end of its headers; later is 408. */
  headersTimeoutMs: number;
  /** From the start of a body's read to its last byte; later is 408 and the connection is closed. */
  bodyTimeoutMs: number;
  /** An idle keep-alive connection is closed after this; longer than a load balancer's idle timeout (docs/operations.md). */
  keepAliveTimeoutMs: number;
  /** Request bodies still arriving per API key (and for the GraphQL token) in one process; 0 = no limit. */
  maxBodiesInFlightPerKey: number;
}

/** The HTTP limits when no variable sets them. */
export const DEFAULT_HTTP_LIMITS: HttpLimits = {
  headersTimeoutMs: 30_000,
  bodyTimeoutMs: 30_000,
  keepAliveTimeoutMs: 65_000,
  maxBodiesInFlightPerKey: 100,
};

const schema = z.object({
  PORT: int(0, 65535).default(8080),
  HOST: z.string().min(1).default('127.0.0.1'),
  PUBLIC_BASE_URL: z.url({ protocol: /^https?$/ }).optional(),
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL')
    .optional(),
  DATA_DIR: z.string().min(1).default('.data'),
  /** Named prepared statements for the hot statements; 0 behind a pooler that cannot keep them (PgBouncer in transaction mode). */
  DATABASE_PREPARED_STATEMENTS: flagOn,
  ENGINE: z.enum(['embedded', 'temporal']).default('embedded'),
  TEMPORAL_ADDRESS: z.string().min(1).default('localhost:7233'),
  TEMPORAL_NAMESPACE: z.string().min(1).default('default'),
  TEMPORAL_TASK_QUEUE: z.string().min(1).default('workflow-runs'),
  /** With ENGINE=temporal, `npm start` also runs a worker in its process; off for API-only processes. */
  TEMPORAL_WORKER: z
    .enum(['on', 'off', '1', '0', 'true', 'false'])
    .default('on')
    .transform((v) => v === 'on' || v === '1' || v === 'true'),
  /** The Temporal CLI for `npm run temporal` and the tests; found in .venv-temporal/bin or on PATH otherwise. */
  TEMPORAL_CLI: z.string().min(1).optional(),
  /** At start, how many times a process tries to reach Temporal, and how long it waits between tries. */
  TEMPORAL_CONNECT_ATTEMPTS: int(1).default(30),
  TEMPORAL_CONNECT_INTERVAL_MS: int(0).default(2000),
  CATALOG_FILE: z.string().min(1).optional(),
  INTERNAL_API_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  RUN_CAPACITY: int(1).default(16),
  QUEUE_MAX_WAIT_SECONDS: int(1).default(900),
  /** How long a run may wait for credentials (wait_signal) before it fails; default one day. */
  CREDENTIALS_WAIT_SECONDS: int(1).default(86400),
  COMPUTE_LIMIT_USD: decimal.default('5'),
  SSE_HEARTBEAT_MS: int(10).default(15000),
  /** On SIGTERM/SIGINT, how long the drain may take before the process exits anyway (docs/operations.md). */
  SHUTDOWN_GRACE_SECONDS: int(1).default(25),
  /** Open streams per API key (REST SSE) and per token (GraphQL subscriptions) across the deployment; 0 = no limit. */
  MAX_STREAMS_PER_KEY: int(0).default(DEFAULT_MAX_STREAMS_PER_KEY),
  MAX_OUTPUT_BYTES: int(1).default(10 * 1024 * 1024),
  HTTP_HEADERS_TIMEOUT_MS: int(100).default(DEFAULT_HTTP_LIMITS.headersTimeoutMs),
  HTTP_BODY_TIMEOUT_MS: int(100).default(DEFAULT_HTTP_LIMITS.bodyTimeoutMs),
  HTTP_KEEP_ALIVE_TIMEOUT_MS: int(1000).default(DEFAULT_HTTP_LIMITS.keepAliveTimeoutMs),
  MAX_BODIES_IN_FLIGHT_PER_KEY: int(0).default(DEFAULT_HTTP_LIMITS.maxBodiesInFlightPerKey),
  WEBHOOK_ALLOW_INSECURE: flag,
  ALLOW_PRIVATE_NETWORK: flag,
  /** 32 bytes, base64 or hex: the AES-256-GCM key for secrets at rest. Generated under DATA_DIR when unset. */
  ENCRYPTION_KEY: z.string().optional(),
  /** `off`: no /metrics and nothing recorded (the bench measures the instrumentation's cost with it). */
  METRICS: z
    .enum(['on', 'off', '1', '0', 'true', 'false'])
    .default('on')
    .transform((v) => v === 'on' || v === '1' || v === 'true'),
  /** /metrics on a port of its own (and not on the API port); `npm run worker` serves it only with this. */
  METRICS_PORT: int(0, 65535).optional(),
  /** host:port of the Temporal SDK's own Prometheus exporter (worker processes, ENGINE=temporal). */
  TEMPORAL_METRICS_ADDRESS: z
    .string()
    .regex(/^(\[[0-9a-fA-F:]+\]|[^\s:/]+):\d{1,5}$/, 'must be host:port, e.g. 0.0.0.0:9464')
    .optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  NODE_ENV: z.string().default('development'),
});

export type Env = z.infer<typeof schema>;

export interface Config {
  port: number;
  host: string;
  publicBaseUrl: string | undefined;
  databaseUrl: string | undefined;
  /** src/sql statements as named prepared statements on a Postgres server (src/db/server-orm.ts). */
  preparedStatements: boolean;
  dataDir: string;
  engine: 'embedded' | 'temporal';
  temporal: {
    address: string;
    namespace: string;
    taskQueue: string;
    worker: boolean;
    cli: string | undefined;
    /** Tries to reach Temporal at start before giving up (src/engine/temporal/wait-for-temporal.ts). */
    connect: { attempts: number; intervalMs: number };
  };
  catalogFile: string | null;
  internalApiToken: string;
  internalApiTokenGenerated: boolean;
  runCapacity: number;
  queueMaxWaitSeconds: number;
  credentialsWaitSeconds: number;
  computeLimitUsd: string;
  sseHeartbeatMs: number;
  /** The bound on a SIGTERM/SIGINT drain (SHUTDOWN_GRACE_SECONDS). */
  shutdownGraceMs: number;
  /** Open streams per API key / GraphQL token across processes; 0 = no limit. */
  maxStreamsPerKey: number;
  maxOutputBytes: number;
  http: HttpLimits;
  webhookAllowInsecure: boolean;
  allowPrivateNetwork: boolean;
  encryptionKey: string | undefined;
  logLevel: Env['LOG_LEVEL'];
  metrics: { enabled: boolean; port: number | undefined; temporalAddress: string | undefined };
  production: boolean;
  providers: ProviderEnv;
}

export interface ProviderEnv {
  openai: { apiKey?: string; baseURL?: string };
  anthropic: { apiKey?: string; baseURL?: string };
  google: { apiKey?: string; baseURL?: string };
  azure_openai: { apiKey?: string; baseURL?: string; resourceName?: string };
  vertex: { apiKey?: string; baseURL?: string; project?: string; location?: string };
  openrouter: { apiKey?: string; baseURL?: string };
}

export class ConfigError extends Error {
  readonly code = 'config_invalid';
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // An empty variable means "not set", as it does for most shells' `VAR= cmd`.
  const present = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = schema.safeParse(present);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`invalid configuration:\n  ${lines.join('\n  ')}`);
  }
  const e = parsed.data;
  const token = e.INTERNAL_API_TOKEN ?? randomBytes(24).toString('base64url');
  const catalog = e.CATALOG_FILE === undefined ? DEMO_CATALOG_FILE : e.CATALOG_FILE === 'none' ? null : e.CATALOG_FILE;
  const opt = (k: string) => present[k] ?? undefined;
  return {
    port: e.PORT,
    host: e.HOST,
    publicBaseUrl: e.PUBLIC_BASE_URL?.replace(/\/+$/, ''),
    databaseUrl: e.DATABASE_URL,
    preparedStatements: e.DATABASE_PREPARED_STATEMENTS,
    dataDir: e.DATA_DIR,
    engine: e.ENGINE,
    temporal: {
      address: e.TEMPORAL_ADDRESS,
      namespace: e.TEMPORAL_NAMESPACE,
      taskQueue: e.TEMPORAL_TASK_QUEUE,
      worker: e.TEMPORAL_WORKER,
      cli: e.TEMPORAL_CLI,
      connect: { attempts: e.TEMPORAL_CONNECT_ATTEMPTS, intervalMs: e.TEMPORAL_CONNECT_INTERVAL_MS },
    },
    catalogFile: catalog,
    internalApiToken: token,
    internalApiTokenGenerated: e.INTERNAL_API_TOKEN === undefined,
    runCapacity: e.RUN_CAPACITY,
    queueMaxWaitSeconds: e.QUEUE_MAX_WAIT_SECONDS,
    credentialsWaitSeconds: e.CREDENTIALS_WAIT_SECONDS,
    computeLimitUsd: e.COMPUTE_LIMIT_USD,
    sseHeartbeatMs: e.SSE_HEARTBEAT_MS,
    shutdownGraceMs: e.SHUTDOWN_GRACE_SECONDS * 1000,
    maxStreamsPerKey: e.MAX_STREAMS_PER_KEY,
    maxOutputBytes: e.MAX_OUTPUT_BYTES,
    http: {
      headersTimeoutMs: e.HTTP_HEADERS_TIMEOUT_MS,
      bodyTimeoutMs: e.HTTP_BODY_TIMEOUT_MS,
      keepAliveTimeoutMs: e.HTTP_KEEP_ALIVE_TIMEOUT_MS,
      maxBodiesInFlightPerKey: e.MAX_BODIES_IN_FLIGHT_PER_KEY,
    },
    webhookAllowInsecure: e.WEBHOOK_ALLOW_INSECURE,
    allowPrivateNetwork: e.ALLOW_PRIVATE_NETWORK,
    encryptionKey: e.ENCRYPTION_KEY,
    logLevel: e.LOG_LEVEL,
    metrics: { enabled: e.METRICS, port: e.METRICS_PORT, temporalAddress: e.TEMPORAL_METRICS_ADDRESS },
    production: e.NODE_ENV === 'production',
    providers: {
      openai: { apiKey: opt('OPENAI_API_KEY'), baseURL: opt('OPENAI_BASE_URL') },
      anthropic: { apiKey: opt('ANTHROPIC_API_KEY'), baseURL: opt('ANTHROPIC_BASE_URL') },
      google: { apiKey: opt('GOOGLE_GENERATIVE_AI_API_KEY'), baseURL: opt('GOOGLE_BASE_URL') },
      azure_openai: {
        apiKey: opt('AZURE_OPENAI_API_KEY'),
        baseURL: opt('AZURE_OPENAI_BASE_URL'),
        resourceName: opt('AZURE_OPENAI_RESOURCE_NAME'),
      },
      vertex: {
        apiKey: opt('VERTEX_API_KEY'),
        baseURL: opt('VERTEX_BASE_URL'),
        project: opt('VERTEX_PROJECT'),
        location: opt('VERTEX_LOCATION'),
      },
      openrouter: { apiKey: opt('OPENROUTER_API_KEY'), baseURL: opt('OPENROUTER_BASE_URL') },
    },
  };
}

/** For entry points: the configuration, or the reason it is invalid on stderr and exit code 2. */
export function loadConfigOrExit(env: NodeJS.ProcessEnv = process.env): Config {
  try {
    return loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message);
      process.exit(2);
    }
    throw err;
  }
}

/** The `/v1` prefix of absolute URLs in responses. */
export function baseUrl(config: Config): string {
  return config.publicBaseUrl ?? `http://localhost:${config.port}/v1`;
}
