import { createHash, createHmac, randomUUID } from 'node:crypto';
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
 *   src/runs/start-run.ts): the runs row, its `run.queued` event (a run_event_batches row), an idempotency record.
 * - POST /cte/runs: the whole acceptance of a request WITH an Idempotency-Key as ONE statement on a pool of 4
 *   (the tightest floor known here): the key's hash is looked up with its scopes, the workflow and its
 *   active version are read, the idempotency record is claimed with `insert … on conflict` (replay vs new,
 *   the fingerprint compared), the run and its `run.queued` event are inserted. The input check and the
 *   fingerprint (an HMAC of the body) are computed here. Its runs get phase `floor`, outside the queue
 *   index, so the engine of the process never executes them (one index entry less than the service's).
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
  /** The one-statement floor's connections: a pool of 4 on a server. */
  cte: Query;
  close(): Promise<void>;
}

const RUN_COLUMNS = `id, account_id, workflow_id, version_id, status, phase, reason, suspend_reason, outcome,
  billing_status, charge_usd, outputs, created_at, queued_at, started_at, completed_at, last_sequence`;

async function openDb(opts: FloorOptions): Promise<Db> {
  if (opts.databaseUrl) {
    const pool = new pg.Pool({ connectionString: opts.databaseUrl, max: 10 });
    const small = new pg.Pool({ connectionString: opts.databaseUrl, max: 4 });
    const query: Query = async (sql, params) => (await pool.query(sql, params)).rows;
    return {
      driver: 'pg Pool(max 10); one-statement floor: pg Pool(max 4), a named prepared statement',
      query,
      cte: async (sql, params) => (await small.query({ name: 'floor_accept', text: sql, values: params })).rows,
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
      close: async () => {
        await pool.end();
        await small.end();
      },
    };
  }
  // The service's own PGlite instance (one per process): its transaction() holds the single connection.
  const connection = opts.orm.em.getConnection() as unknown as { getNativeClient(): Promise<PGliteLike> };
  const pglite = await connection.getNativeClient();
  return {
    driver: "the service's PGlite instance",
    query: async (sql, params) => (await pglite.query(sql, params)).rows,
    cte: async (sql, params) => (await pglite.query(sql, params)).rows,
    tx: (fn) => pglite.transaction((t) => fn(async (sql, params) => (await t.query(sql, params)).rows)),
    close: async () => undefined,
  };
}

interface PGliteLike {
  query(sql: string, params?: unknown[]): Promise<{ rows: Record<string, unknown>[] }>;
  transaction<T>(fn: (tx: { query(sql: string, params?: unknown[]): Promise<{ rows: Record<string, unknown>[] }> }) => Promise<T>): Promise<T>;
}

/** POST /cte/runs in one statement; $1 key hash, $2 workflow, $3 record id, $4 idempotency key, $5 fingerprint, $6 run id, $7 inputs. */
const ACCEPT_CTE = `with k as (
    select id, account_id from api_keys
     where key_hash = $1 and not revoked and (expires_at is null or expires_at > now()) and scopes @> '["run:execute"]'::jsonb),
  w as (
    select w.id, w.active_version_id, w.credential_mode, w.compute_limit_usd from workflows w
     where w.id = $2 and w.api_access and w.active_version_id is not null),
  i as (
    insert into idempotency_records (id, account_id, key, fingerprint, run_id, created_at, expires_at)
    select $3, k.account_id, $4, $5, $6, now(), now() + interval '24 hours' from k, w
    on conflict (account_id, key) do update set key = excluded.key
    returning run_id, fingerprint),
  r as (
    insert into runs (id, account_id, api_key_id, workflow_id, version_id, status, phase, billing_status,
                      cap_usd, user_access, displayed_price_usd, creator_price_usd, step_usd, compute_limit_usd,
                      credential_mode, inputs, progress, outputs, engine, last_sequence, created_at, queued_at, updated_at)
    select $6, k.account_id, k.id, w.id, w.active_version_id, 'pending', 'floor', 'pending', $8, 'owned', $8, 0, $9,
           coalesce(w.compute_limit_usd, $10), w.credential_mode, $7::jsonb, '{"results":{},"timers":{}}'::jsonb, '[]'::jsonb,
           'floor', 1, clock_timestamp(), clock_timestamp(), clock_timestamp()
      from k, w, i where i.run_id = $6
    returning id, created_at),
  e as (
    insert into run_event_batches (run_id, last_sequence, types, node_ids, data, ts)
    select r.id, 1, array['run.queued'], array[null]::text[], array['{"status":"pending"}'::jsonb], r.created_at from r)
  select (select count(*) from k)::int as keys, i.run_id, i.fingerprint = $5 as same from (select 1) one left join i on true`;

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
        [
          runId,
          opts.accountId,
          opts.apiKeyId,
          body.workflow ?? opts.workflowId,
          opts.versionId,
          opts.displayedPriceUsd,
          opts.stepUsd,
          opts.computeLimitUsd,
          JSON.stringify(body.inputs ?? {}),
          progress,
        ],
      );
      await q(
        `insert into run_event_batches (run_id, last_sequence, types, node_ids, data, ts) values ($1, 1, array['run.queued'], array[null]::text[], array['{"status":"pending"}'::jsonb], clock_timestamp())`,
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

  // The one-statement acceptance: what the service checks in memory is checked here too (body shape,
  // key, inputs), the fingerprint is an HMAC of the normalised request like the service's.
  const fingerprintKey = randomUUID();
  const acceptCte = async (req: IncomingMessage, body: { workflow?: unknown; inputs?: unknown; idempotencyKey?: unknown }): Promise<[number, unknown]> => {
    const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? '');
    if (!bearer) return [401, { error: { code: 'unauthorized', message: 'missing API key' } }];
    const inputs = body.inputs;
    if (typeof body.workflow !== 'string' || !inputs || typeof inputs !== 'object' || typeof (inputs as { name?: unknown }).name !== 'string') {
      return [400, { error: { code: 'invalid_request', message: 'bad body' } }];
    }
    const key = (req.headers['idempotency-key'] as string | undefined) ?? (typeof body.idempotencyKey === 'string' ? body.idempotencyKey : randomUUID());
    const fingerprint = createHmac('sha256', fingerprintKey)
      .update(JSON.stringify({ workflow: body.workflow, inputs, version: null }))
      .digest('hex');
    const runId = randomUUID();
    const hash = createHash('sha256').update(bearer[1]!, 'utf8').digest('hex');
    const [row] = await db.cte(ACCEPT_CTE, [
      hash,
      body.workflow,
      randomUUID(),
      key,
      fingerprint,
      runId,
      JSON.stringify(inputs),
      opts.displayedPriceUsd,
      opts.stepUsd,
      opts.computeLimitUsd,
    ]);
    if (!row || !row.keys) return [401, { error: { code: 'unauthorized', message: 'unknown API key' } }];
    if (!row.run_id) return [404, { error: { code: 'not_found', message: 'workflow not found' } }];
    if (!row.same) return [409, { error: { code: 'idempotency_conflict', message: 'key reused' } }];
    const statusUrl = `http://localhost/v1/runs/${String(row.run_id)}`;
    return [202, { run: { id: row.run_id, status: 'accepted', statusUrl, eventsUrl: `${statusUrl}/events`, streamUrl: `${statusUrl}/stream` } }];
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
    if (req.method === 'POST' && url === '/cte/runs') {
      const chunks: Buffer[] = [];
      for await (const c of req as AsyncIterable<Buffer>) chunks.push(c);
      const [status, out] = await acceptCte(req, JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>);
      send(res, status, out);
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
