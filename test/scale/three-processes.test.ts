import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { Orm } from '../../src/db/orm.ts';
import { resetDb, testOrm } from '../helpers/db.ts';
import { startService, type ServiceProcess } from '../helpers/service-process.ts';
import { readSse, wholeLogProblem, type SseFrame } from '../helpers/sse-frames.ts';
import { waitFor as waitUntil } from '../helpers/wait-for.ts';

/**
 * Three real `npm start` processes (embedded engine, RUN_CAPACITY=1 each) on one Postgres server
 * behave as one service (docs/scaling.md), proven through HTTP only: the POST /runs rate limit,
 * idempotency and spend caps are shared; capacity and FIFO admission hold deployment-wide; queue
 * places read the same on every process; a cancel through one process stops the run another executes;
 * a stream on any process sees every event of a run executed elsewhere; the open-stream limit counts
 * every process; and after a `kill -9` of the executing process another takes the run over and
 * completes it once, charged once, while a stream elsewhere sees the rest without gap or duplicate.
 */

const QUICK = 'dddddddd-0000-4000-8000-000000000001';
const SLOW = 'dddddddd-0000-4000-8000-000000000002';
const FETCH = 'dddddddd-0000-4000-8000-000000000003';
const KEY = 'wr_3p_bob';
const LIMITED = 'wr_3p_bob_limited';
const CAPPED = 'wr_3p_bob_capped';

const catalog = {
  pricing: { stepUsd: '0.000100' },
  accounts: [
    {
      handle: 'bob',
      walletUsd: '10.000000',
      apiKeys: [
        { secret: KEY, scopes: ['run:execute', 'run:read'], rateLimitPerMinute: 1000 },
        { secret: LIMITED, scopes: ['run:execute', 'run:read'], rateLimitPerMinute: 3 },
        // Two one-step runs (0.0001 each) fit, a third does not.
        { secret: CAPPED, scopes: ['run:execute', 'run:read'], spendCap: { window: 'daily', usd: '0.000250' } },
      ],
    },
  ],
  workflows: [
    {
      id: QUICK,
      owner: 'bob',
      name: 'Quick',
      runModel: 'free',
      versions: [
        {
          label: 'v1',
          graph: {
            nodes: [
              { id: 't', kind: 'text.template', template: 'hi' },
              { id: 'out', kind: 'output', from: 't' },
            ],
          },
        },
      ],
    },
    {
      id: SLOW,
      owner: 'bob',
      name: 'Slow',
      runModel: 'free',
      versions: [
        {
          label: 'v1',
          graph: {
            nodes: [
              { id: 'url', kind: 'input.url', required: true },
              { id: 't1', kind: 'http.request', url: '{{url}}' },
              { id: 'wait', kind: 'delay', seconds: 1, after: ['t1'] },
              { id: 't2', kind: 'text.template', template: '{{t1}} world', after: ['wait'] },
              { id: 'out', kind: 'output', from: 't2' },
            ],
          },
        },
      ],
    },
    {
      id: FETCH,
      owner: 'bob',
      name: 'Fetch',
      runModel: 'free',
      versions: [
        {
          label: 'v1',
          graph: {
            nodes: [
              { id: 'url', kind: 'input.url', required: true },
              { id: 'fetch', kind: 'http.request', url: '{{url}}' },
              { id: 'out', kind: 'output', from: 'fetch' },
            ],
          },
        },
      ],
    },
  ],
};

interface Proc {
  name: string;
  svc: ServiceProcess;
  base: string;
}

interface Ctx {
  procs: Proc[];
  orm: Orm;
  /** A local endpoint: holds the first request of each path until the client hangs up, answers later ones. */
  slow: Server;
  slowUrl: string;
  held: Map<string, { arrived: Promise<void>; hungUp: Promise<number> }>;
  /** Requests to /gate… paths, answered when the test calls their function. */
  gates: Map<string, () => void>;
}

const t = suite<Ctx>('three processes on one Postgres server');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function call(base: string, method: string, path: string, key: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${base}/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  const json = (res.headers.get('content-type') ?? '').includes('json');
  return { status: res.status, headers: res.headers, body: json && text ? JSON.parse(text) : undefined, text };
}

async function start(base: string, workflow: string, inputs: Record<string, unknown> = {}, key = KEY): Promise<string> {
  const res = await call(base, 'POST', '/runs', key, { workflow, inputs });
  assert.is(res.status, 202, res.text);
  return res.body.run.id;
}

/** The suite's waits: processes start and hand runs over in seconds. */
const waitFor = <T>(what: string, probe: () => Promise<T | undefined | null | false>, ms = 30_000) => waitUntil(what, probe, ms, 50);

const getRun = async (base: string, id: string) => (await call(base, 'GET', `/runs/${id}`, KEY)).body;
const settled = (base: string, id: string) =>
  waitFor(
    `run ${id} to end`,
    async () => {
      const r = await getRun(base, id);
      return ['completed', 'failed', 'cancelled'].includes(r.status) ? r : null;
    },
    60_000,
  );

/** The process whose embedded engine holds the run's lease (its instance id carries the process id). */
async function executor(ctx: Ctx, id: string): Promise<Proc> {
  return waitFor(`an executor of ${id}`, async () => {
    const [row] = await ctx.orm.em.fork().execute<{ lease_owner: string | null }[]>('select lease_owner from runs where id = ?', [id]);
    const pid = /^embedded-(\d+)-/.exec(row?.lease_owner ?? '')?.[1];
    return ctx.procs.find((p) => String(p.svc.child.pid) === pid);
  });
}

const stream = (base: string, id: string, key = KEY) => readSse(`${base}/v1/runs/${id}/stream`, { authorization: `Bearer ${key}` });

function assertWholeLog(frames: SseFrame[], what: string) {
  const problem = wholeLogProblem(frames);
  assert.ok(problem === null, `${what}: ${problem}`);
}

if (!process.env.DATABASE_URL) {
  console.log('  three processes: skipped — needs a Postgres server (DATABASE_URL); embedded PGlite serves one process');
} else {
  t.before(async (ctx) => {
    ctx.orm = await testOrm();
    await resetDb(ctx.orm);
    ctx.held = new Map();
    ctx.gates = new Map();
    ctx.slow = createServer((req, res) => {
      const path = req.url ?? '/';
      if (path.startsWith('/gate')) return void ctx.gates.set(path, () => res.end('hello'));
      if (ctx.held.has(path)) return void res.end('second answer');
      let arrived!: () => void;
      let hungUp!: (at: number) => void;
      ctx.held.set(path, { arrived: new Promise((r) => (arrived = r)), hungUp: new Promise((r) => (hungUp = r)) });
      req.socket.on('close', () => hungUp(Date.now()));
      arrived();
    });
    await new Promise<void>((resolve) => ctx.slow.listen(0, '127.0.0.1', resolve));
    ctx.slowUrl = `http://127.0.0.1:${(ctx.slow.address() as { port: number }).port}`;

    mkdirSync('.tmp', { recursive: true });
    const file = join('.tmp', `three-processes-catalog-${process.pid}.json`);
    writeFileSync(file, JSON.stringify(catalog));
    const shared = {
      DATABASE_URL: process.env.DATABASE_URL!,
      ENCRYPTION_KEY: randomBytes(32).toString('hex'),
      INTERNAL_API_TOKEN: 'three-processes-internal-token',
      RUN_CAPACITY: '1',
      ALLOW_PRIVATE_NETWORK: '1',
      MAX_STREAMS_PER_KEY: '3',
      ENGINE: 'embedded',
      HOST: '127.0.0.1',
    };
    const dir = () => mkdtempSync(join(tmpdir(), 'wr-3p-'));
    // A loads the catalog; B and C start on the database as it is.
    const a = startService({ ...shared, CATALOG_FILE: file, DATA_DIR: dir() });
    const aUrl = await a.url;
    const others = ['B', 'C'].map((name) => ({ name, svc: startService({ ...shared, CATALOG_FILE: 'none', DATA_DIR: dir() }) }));
    ctx.procs = [{ name: 'A', svc: a, base: aUrl }, ...(await Promise.all(others.map(async (o) => ({ ...o, base: await o.svc.url }))))];
  });

  t.after(async (ctx) => {
    await Promise.all((ctx.procs ?? []).map((p) => p.svc.stop()));
    ctx.slow?.closeAllConnections();
    ctx.slow?.close();
  });

  t('the rate limit, idempotency and spend caps are one across processes', async ({ procs }) => {
    const [a, b, c] = procs as [Proc, Proc, Proc];
    // 3 per minute: each process counts the others' requests; the 4th is refused wherever it lands.
    const remaining: string[] = [];
    for (const p of [a, b, c]) {
      const res = await call(p.base, 'POST', '/runs', LIMITED, { workflow: QUICK, inputs: {} });
      assert.is(res.status, 202, `${p.name}: ${res.text}`);
      assert.is(res.headers.get('ratelimit-limit'), '3');
      remaining.push(res.headers.get('ratelimit-remaining')!);
    }
    assert.equal(remaining, ['2', '1', '0']);
    for (const p of [a, b]) {
      const refused = await call(p.base, 'POST', '/runs', LIMITED, { workflow: QUICK, inputs: {} });
      assert.is(refused.status, 429, p.name);
      assert.is(refused.body.error.code, 'rate_limited');
      assert.equal([refused.headers.get('ratelimit-limit'), refused.headers.get('ratelimit-remaining')], ['3', '0']);
      assert.ok(Number(refused.headers.get('retry-after')) >= 1);
    }

    // One Idempotency-Key sent to three processes at once: one run, two replays; another body conflicts.
    const key = `idem-${randomBytes(6).toString('hex')}`;
    const same = await Promise.all(procs.map((p) => call(p.base, 'POST', '/runs', KEY, { workflow: QUICK, inputs: {} }, { 'idempotency-key': key })));
    assert.equal(
      same.map((r) => r.status),
      [202, 202, 202],
    );
    assert.is(new Set(same.map((r) => r.body.run.id)).size, 1, 'one run');
    assert.is(same.filter((r) => r.headers.get('idempotent-replayed') === 'true').length, 2, 'two replays');
    const other = await call(c.base, 'POST', '/runs', KEY, { workflow: FETCH, inputs: { url: 'http://127.0.0.1:1/' } }, { 'idempotency-key': key });
    assert.is(other.status, 409);
    assert.is(other.body.error.code, 'idempotency_conflict');

    // The daily cap fits two runs: accepted by A and B, the third refused by C.
    assert.is((await call(a.base, 'POST', '/runs', CAPPED, { workflow: QUICK, inputs: {} })).status, 202);
    assert.is((await call(b.base, 'POST', '/runs', CAPPED, { workflow: QUICK, inputs: {} })).status, 202);
    const capped = await call(c.base, 'POST', '/runs', CAPPED, { workflow: QUICK, inputs: {} });
    assert.is(capped.status, 402);
    assert.is(capped.body.error.code, 'spend_cap_reached');

    // Let every run of this test end before the capacity test.
    await waitFor('an empty service', async () => {
      const list = await call(a.base, 'GET', '/runs?limit=50', KEY);
      return list.body.runs.every((r: { status: string }) => ['completed', 'failed', 'cancelled'].includes(r.status));
    });
  });

  t('capacity and FIFO admission hold across processes; every process reads the same exact places; a stream elsewhere sees the whole run', async (ctx) => {
    const [a, b, c] = ctx.procs as [Proc, Proc, Proc];
    // x holds the only slot of the deployment while its first step waits for the gate.
    const x = await start(a.base, SLOW, { url: `${ctx.slowUrl}/gate-x` });
    const runner = await executor(ctx, x);
    const watcher = ctx.procs.find((p) => p !== runner)!;
    const watched = stream(watcher.base, x);
    await waitFor('x in its first step', async () => ctx.gates.get('/gate-x'));
    const ys = [await start(b.base, QUICK), await start(c.base, QUICK), await start(a.base, QUICK)];
    for (const p of ctx.procs) {
      const read = await Promise.all(ys.map((y) => getRun(p.base, y)));
      assert.equal(
        read.map((r) => r.queue?.position),
        [1, 2, 3],
        `places read on ${p.name}: ${JSON.stringify(read.map((r) => [r.status, r.queue]))}`,
      );
    }
    ctx.gates.get('/gate-x')!();
    const runs = [await settled(a.base, x)];
    for (const y of ys) runs.push(await settled(b.base, y));
    assert.ok(runs.every((r) => r.status === 'completed'));
    for (let i = 1; i < runs.length; i++) {
      assert.ok(
        Date.parse(runs[i].startedAt) >= Date.parse(runs[i - 1].completedAt),
        `run ${i + 1} started after run ${i} completed: one in flight across the deployment, in order`,
      );
    }
    await watched.ended;
    assertWholeLog(watched.frames, `stream on ${watcher.name} of a run executed by ${runner.name}`);
    const types = watched.frames.slice(1).map((f) => f.type);
    assert.ok(types.includes('run.suspended') && types.includes('run.resumed'), types.join(','));
    assert.is(types.at(-1), 'run.completed');
    const log = await call(a.base, 'GET', `/runs/${x}/events`, KEY);
    assert.equal(
      log.body.events.map((e: any) => `${e.sequence}:${e.type}`),
      watched.frames.slice(1).map((f) => `${f.id}:${f.type}`),
    );
  });

  t('the open-stream limit counts every process; a cancel through another process stops the run at once', async (ctx) => {
    const id = await start(ctx.procs[1]!.base, FETCH, { url: `${ctx.slowUrl}/cancel-me` });
    await waitFor('the request to arrive', async () => ctx.held.get('/cancel-me'));
    await ctx.held.get('/cancel-me')!.arrived;
    const runner = await executor(ctx, id);
    const others = ctx.procs.filter((p) => p !== runner);
    // MAX_STREAMS_PER_KEY=3 over the three processes.
    const open = [stream(ctx.procs[0]!.base, id), stream(ctx.procs[1]!.base, id), stream(ctx.procs[2]!.base, id)];
    assert.equal(await Promise.all(open.map((s) => s.status)), [200, 200, 200]);
    for (const p of ctx.procs) {
      const refused = await call(p.base, 'GET', `/runs/${id}/stream`, KEY);
      assert.is(refused.status, 429, p.name);
      assert.is(refused.body.error.code, 'too_many_streams');
    }
    const at = Date.now();
    const cancel = await call(others[0]!.base, 'POST', `/runs/${id}/cancel`, KEY);
    assert.equal([cancel.status, cancel.body.status], [200, 'cancelled']);
    const hungUp = await Promise.race([ctx.held.get('/cancel-me')!.hungUp, sleep(3_000).then(() => Infinity)]);
    assert.ok(hungUp - at < 750, `${runner.name} aborted its HTTP request ${hungUp - at} ms after ${others[0]!.name} cancelled the run`);
    for (const s of open) {
      await s.ended;
      assert.is(s.frames.at(-1)?.type, 'run.cancelled');
    }
    const run = await getRun(ctx.procs[2]!.base, id);
    assert.equal([run.status, run.billingStatus], ['cancelled', 'not_charged']);
    // The slots came back: three streams open again (on a finished run they end at once).
    const again = await waitFor('free slots', async () => (await call(runner.base, 'GET', `/runs/${id}/stream`, KEY)).status === 200);
    assert.ok(again);
  });

  t(
    'kill -9 of the executing process: another takes the run over, it completes once, charged once, and a stream elsewhere sees every event once',
    async (ctx) => {
      const id = await start(ctx.procs[0]!.base, FETCH, { url: `${ctx.slowUrl}/kill-me` });
      await waitFor('the request to arrive', async () => ctx.held.get('/kill-me'));
      await ctx.held.get('/kill-me')!.arrived;
      const victim = await executor(ctx, id);
      const watcher = ctx.procs.find((p) => p !== victim)!;
      const watched = stream(watcher.base, id);
      await waitFor('the stream to catch up', async () => watched.frames.some((f) => f.type === 'node.started'));
      victim.svc.child.kill('SIGKILL');
      ctx.procs = ctx.procs.filter((p) => p !== victim);
      // The lease (15 s) expires and a survivor's sweep claims the run and runs the step again.
      const run = await settled(watcher.base, id);
      assert.is(run.status, 'completed');
      assert.equal(
        run.outputs.map((o: any) => o.value),
        ['second answer'],
      );
      const successor = (
        await ctx.orm.em.fork().execute<{ n: number }[]>("select count(*)::int as n from run_events where run_id = ? and type = 'run.completed'", [id])
      )[0]!;
      assert.is(successor.n, 1, 'completed once');
      const charges = await ctx.orm.em
        .fork()
        .execute<{ n: number; usd: string }[]>(
          "select count(*)::int as n, coalesce(sum(amount_usd), 0)::text as usd from ledger_entries where run_id = ? and kind = 'charge'",
          [id],
        );
      assert.is(charges[0]!.n, 1, 'charged once');
      assert.equal([run.billingStatus, run.displayedChargeUsd], ['settled', 0.0001]);
      await watched.ended;
      assertWholeLog(watched.frames, `stream on ${watcher.name} across the kill of ${victim.name}`);
      assert.is(watched.frames.at(-1)!.type, 'run.completed');
      const log = await call(watcher.base, 'GET', `/runs/${id}/events`, KEY);
      assert.equal(
        log.body.events.map((e: any) => `${e.sequence}:${e.type}`),
        watched.frames.slice(1).map((f) => `${f.id}:${f.type}`),
      );
    },
  );
}

t.run();
