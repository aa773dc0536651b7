import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import pg from 'pg';
import type { Orm } from '../src/db/orm.ts';

/**
 * The floor: a bare node:http server doing only the database work of an operation, with no framework,
 * no authentication, no routing table, no validation and no ORM; what is left is the HTTP parsing and
 * the round trips. It shares the service's database: a `pg` pool of the service's size (10) on a
 * Postgres server, the service's own PGlite instance otherwise (PGlite is one connection per process).
 *
 * - POST /runs: one transaction inserting what POST /runs commits (columns copied from
 *   src/services/runs/start-run.ts): the runs row, its `run.queued` run_events row, an idempotency record.
 * - GET /runs/{id}: the one select of GET /runs/{id} (run-views RUN_COLUMNS), answered as JSON.
 * - GET /sse[?hot=1]: an idle server-sent-events response with a heartbeat timer (the framing of
 *   GET /runs/{id}/stream, no database); `broadcast` writes one frame to every `hot` stream. The floor
 *   of memory per stream and of live-event fan-out.
 */

export interface FloorOptions {
  orm: Orm;
  databaseUrl?: string;
  accountId: string;
  apiKeyId: string;
  workflowId: string;
  versionId: string;
  /** Idle SSE heartbeat period (the service's SSE_HEARTBEAT_MS). */
  sseHeartbeatMs: number;
  /** Displayed price of the workflow for this caller (3 steps × step price). */
  displayedPriceUsd: string;
  stepUsd: string;
  computeLimitUsd: string;
}

type Query = (sql: string, params: unknown[]) => Promise<Record<string, unknown>[]>;
interface Db {
  driver: string;
  /** Runs `fn` in one transaction. */
  tx<T>(fn: (q: Query) => Promise<T>): Promise<T>;
  query: Query;
  close(): Promise<void>;
}

const RUN_COLUMNS = `id, account_id, workflow_id, version_id, status, phase, reason, suspend_reason, outcome,
  billing_status, charge_usd, outputs, created_at, queued_at, started_at, completed_at, last_sequence`;

async function openDb(opts: FloorOptions): Promise<Db> {
  if (opts.databaseUrl) {
    const pool = new pg.Pool({ connectionString: opts.databaseUrl, max: 10 });
    const query: Query = async (sql, params) => (await pool.query(sql, params)).rows;
    return {
      driver: 'pg Pool(max 10)',
      query,
      async tx(fn) {
        const client = await pool.connect();
        try {
          await client.query('begin');
          const out = await fn(async (sql, params) => (await client.query(sql, params)).rows);
          await client.query('commit');
          return out;
        } catch (err) {
          await client.query('rollback').catch(() => undefined);
          throw err;
        } finally {
          client.release();
        }
      },
      close: () => pool.end(),
    };
  }
  // The service's own PGlite instance (one per process): its transaction() holds the single connection.
  const connection = opts.orm.em.getConnection() as unknown as { getNativeClient(): Promise<PGliteLike> };
  const pglite = await connection.getNativeClient();
  return {
    driver: "the service's PGlite instance",
    query: async (sql, params) => (await pglite.query(sql, params)).rows,
    tx: (fn) => pglite.transaction((t) => fn(async (sql, params) => (await t.query(sql, params)).rows)),
    close: async () => undefined,
  };
}

interface PGliteLike {
  query(sql: string, params?: unknown[]): Promise<{ rows: Record<string, unknown>[] }>;
  transaction<T>(fn: (tx: { query(sql: string, params?: unknown[]): Promise<{ rows: Record<string, unknown>[] }> }) => Promise<T>): Promise<T>;
}

export interface Floor {
  url: string;
  driver: string;
  /** Writes one event frame carrying `marker` to every hot SSE stream; returns the wall time before the first write. */
  broadcast(marker: string): number;
  sseOpen(): number;
  close(): Promise<void>;
}

export async function startFloor(opts: FloorOptions): Promise<Floor> {
  const db = await openDb(opts);
  const sse = new Set<ServerResponse>();
  const hot = new Set<ServerResponse>();
  const progress = JSON.stringify({ results: {}, timers: {} });

  const acceptRun = async (body: { workflow?: string; inputs?: unknown }) => {
    const runId = randomUUID();
    await db.tx(async (q) => {
      await q(
        `insert into runs (id, account_id, api_key_id, workflow_id, version_id, status, phase, billing_status,
                           cap_usd, user_access, displayed_price_usd, creator_price_usd, step_usd, compute_limit_usd,
                           credential_mode, inputs, progress, outputs, engine, last_sequence, created_at, queued_at, updated_at)
         values ($1, $2, $3, $4, $5, 'pending', 'queued', 'pending', $6, 'owned', $6, 0, $7, $8, 'service_hosted', $9::jsonb, $10::jsonb,
                 '[]'::jsonb, 'embedded', 1, clock_timestamp(), clock_timestamp(), clock_timestamp())`,
        [runId, opts.accountId, opts.apiKeyId, body.workflow ?? opts.workflowId, opts.versionId, opts.displayedPriceUsd, opts.stepUsd, opts.computeLimitUsd, JSON.stringify(body.inputs ?? {}), progress],
      );
      await q(
        `insert into run_events (run_id, sequence, type, node_id, data, ts) values ($1, 1, 'run.queued', null, '{"status":"pending"}'::jsonb, clock_timestamp())`,
        [runId],
      );
      await q(
        `insert into idempotency_records (id, account_id, key, fingerprint, run_id, created_at, expires_at)
         values ($1, $2, $3, $4, $5, now(), now() + interval '24 hours')`,
        [randomUUID(), opts.accountId, randomUUID(), 'f'.repeat(64), runId],
      );
    });
    return runId;
  };

  const server = createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) send(res, 500, { error: { code: 'internal_error', message: String(err) } });
      else res.destroy();
    });
  });
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const url = req.url ?? '/';
    if (req.method === 'POST' && url === '/runs') {
      const chunks: Buffer[] = [];
      for await (const c of req as AsyncIterable<Buffer>) chunks.push(c);
      const runId = await acceptRun(JSON.parse(Buffer.concat(chunks).toString('utf8')) as { workflow?: string; inputs?: unknown });
      const statusUrl = `http://localhost/v1/runs/${runId}`;
      send(res, 202, { run: { id: runId, status: 'accepted', statusUrl, eventsUrl: `${statusUrl}/events`, streamUrl: `${statusUrl}/stream` } });
      return;
    }
    if (req.method === 'GET' && url.startsWith('/sse')) {
      res.writeHead(200, { 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-store', Connection: 'keep-alive' });
      res.socket?.setNoDelay(true);
      const heartbeat = setInterval(() => res.write(': heartbeat\n\n'), opts.sseHeartbeatMs);
      heartbeat.unref();
      sse.add(res);
      if (url.includes('hot=1')) hot.add(res);
      res.on('close', () => {
        clearInterval(heartbeat);
        sse.delete(res);
        hot.delete(res);
      });
      res.write('event: snapshot\ndata: {}\n\n');
      return;
    }
    const m = /^\/runs\/([0-9a-f-]{36})$/.exec(url);
    if (req.method === 'GET' && m) {
      const [row] = await db.query(`select ${RUN_COLUMNS} from runs where id = $1 and account_id = $2`, [m[1], opts.accountId]);
      if (!row) return send(res, 404, { error: { code: 'not_found', message: 'run not found' } });
      send(res, 200, row);
      return;
    }
    send(res, 404, { error: { code: 'not_found', message: 'no route' } });
  };

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    driver: db.driver,
    broadcast(marker) {
      const t = performance.timeOrigin + performance.now();
      const frame = `id: 1\nevent: node.output.delta\ndata: {"text":"${marker}"}\n\n`;
      for (const res of hot) res.write(frame);
      return t;
    },
    sseOpen: () => sse.size,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await db.close();
    },
  };
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}
