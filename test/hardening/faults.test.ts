import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { Webhook } from 'standardwebhooks';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { openOrm, type Orm } from '../../src/db/orm.ts';
import { isoOrNull } from '../../src/db/sql.ts';
import { EmbeddedEngine } from '../../src/engine/embedded/embedded-engine.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { resetDb, testOrm } from '../helpers/db.ts';
import {
  assertRunLog,
  bootService,
  dollarParams,
  micros,
  request,
  sleep,
  TERMINAL,
  waitFor,
  type EventRow,
  type Reply,
  type Service,
} from './helpers/faults.ts';
import { freePort, privatePostgres, whyNoPrivatePostgres } from './helpers/private-postgres.ts';
import { RUNS_COUNT_SQL } from '../../src/catalog/workflow-access.ts';

/**
 * Fault tests (hardening), with real parts only: real processes, a real Postgres server, real
 * HTTP, no mocks.
 *
 * 1. The Postgres server is restarted six times (`pg_ctl stop -m fast` and `-m immediate`) under the real
 *    service process while runs and requests are in flight. Each restart cuts open transactions; before
 *    the fix in src/db/orm.ts (`reclaimDeadClients`) every such transaction leaked a pool slot and after
 *    ten the process hung for good. It runs on a private throwaway cluster (never the shared server on
 *    5432), so it does not depend on DATABASE_URL and runs in the embedded-PGlite pass of CI only.
 * 2. A webhook endpoint is down (connection refused), then answers 503, then recovers: every terminal
 *    event is delivered once, under the id of its failed attempts, on the production retry schedule.
 * 3. The process is killed (SIGKILL) inside the transaction that settles a run; a restarted process ends
 *    the run once and the money shows exactly one settlement. On a Postgres server the transaction is
 *    held open by a row lock the test owns; on embedded PGlite (one connection, owned by the child) the
 *    child kills itself right after the settlement's last statement, before its commit.
 */

type Q = (sql: string, params?: unknown[]) => Promise<Record<string, any>[]>;

const t = suite('faults');
const skip = (name: string, why: string) => console.log(`  faults: "${name}" skipped — ${why}`);

const STEP = '0.000100';
const ACCOUNT = {
  creator: 'fa000000-0000-4000-8000-0000000000c0',
  payer: 'fa000000-0000-4000-8000-0000000000c1',
  broke: 'fa000000-0000-4000-8000-0000000000c2',
  bundler: 'fa000000-0000-4000-8000-0000000000c3',
} as const;
const WF = {
  quick: 'fa000000-0000-4000-8000-00000000f001',
  slow: 'fa000000-0000-4000-8000-00000000f002',
  bundled: 'fa000000-0000-4000-8000-00000000f003',
} as const;
const PAYER_KEY = 'wr_faults_payer_key_7c1e';
const BROKE_KEY = 'wr_faults_broke_key_2a9d';
const BUNDLER_KEY = 'wr_faults_bundler_key_5b3f';

/** Three chained template steps: started a,b,c; completed a,b,c,out. Charged 0.02 + 3 steps to a wallet caller. */
const QUICK = {
  id: WF.quick,
  owner: 'creator',
  name: 'Quick',
  runModel: 'per_run',
  priceUsd: '0.020000',
  versions: [
    {
      label: 'v1',
      graph: {
        nodes: [
          { id: 'name', kind: 'input.text', name: 'Name', defaultValue: 'Ada' },
          { id: 'a', kind: 'text.template', template: 'Hello {{name}}' },
          { id: 'b', kind: 'text.template', template: '{{a}}!' },
          { id: 'c', kind: 'text.template', template: '{{b}}?' },
          { id: 'out', kind: 'output', from: 'c', name: 'greeting', type: 'text' },
        ],
      },
    },
  ],
};
const QUICK_NODES = { started: ['a', 'b', 'c'], completed: ['a', 'b', 'c', 'out'] };
const QUICK_CHARGE = micros('0.020300');

/** A step, a delay of `seconds`, a step: started a,wait,b; completed a,wait,b,out. Charged 0.01 + 2 steps. */
function slow(seconds: number) {
  return {
    id: WF.slow,
    owner: 'creator',
    name: 'Slow',
    runModel: 'per_run',
    priceUsd: '0.010000',
    versions: [
      {
        label: 'v1',
        graph: {
          nodes: [
            { id: 'a', kind: 'text.template', template: 'early' },
            { id: 'wait', kind: 'delay', seconds, after: ['a'] },
            { id: 'b', kind: 'text.template', template: '{{a}}, then late', after: ['wait'] },
            { id: 'out', kind: 'output', from: 'b', name: 'result', type: 'text' },
          ],
        },
      },
    ],
  };
}
const SLOW_NODES = { started: ['a', 'wait', 'b'], completed: ['a', 'wait', 'b', 'out'] };
const SLOW_CHARGE = micros('0.010200');

const key = (secret: string, extra: Record<string, unknown> = {}) => ({ secret, scopes: ['run:execute', 'run:read'], rateLimitPerMinute: 10_000, ...extra });

// ---------------------------------------------------------------------------------------------------
// 1. Postgres restarted under the running service

const PG_RESTART =
  'Postgres restarted six times (fast and immediate shutdowns) with runs and requests in flight: the service process stays up, answers error envelopes while the database is down, becomes ready again, loses no run and charges each run exactly once';
const pgRestartSkip = process.env.DATABASE_URL
  ? 'it starts its own private Postgres cluster and does not use DATABASE_URL, so it runs in the embedded-PGlite pass only'
  : whyNoPrivatePostgres();

if (pgRestartSkip) skip(PG_RESTART, pgRestartSkip);
else
  t(PG_RESTART, async () => {
    const cluster = await privatePostgres();
    if (typeof cluster === 'string') throw new Error(cluster);
    const dir = mkdtempSync(join(tmpdir(), 'wr-faults-svc-'));
    let svc: Service | undefined;
    let db: pg.Client | undefined;
    try {
      await cluster.createDb('wr_faults');
      const catalogFile = join(dir, 'catalog.json');
      writeFileSync(
        catalogFile,
        JSON.stringify({
          pricing: { stepUsd: STEP },
          accounts: [
            { handle: 'creator', id: ACCOUNT.creator },
            { handle: 'payer', id: ACCOUNT.payer, walletUsd: '20.000000', apiKeys: [key(PAYER_KEY, { spendCap: { window: 'lifetime', usd: '15.000000' } })] },
          ],
          workflows: [QUICK, slow(2)],
        }),
      );
      svc = bootService({ DATABASE_URL: cluster.url('wr_faults'), DATA_DIR: dir, CATALOG_FILE: catalogFile });
      const url = await svc.url;
      const service = svc;
      const why = () => `\n--- service output (tail) ---\n${service.output().slice(-6000)}\n--- postgres log (tail) ---\n${cluster.log().slice(-3000)}`;

      const accepted = new Map<string, string>(); // run id -> workflow id
      const post = async (workflow: string, idempotencyKey?: string): Promise<Reply> => {
        const r = await request(url, 'POST', '/v1/runs', {
          key: PAYER_KEY,
          body: { workflow, inputs: {} },
          headers: idempotencyKey ? { 'idempotency-key': idempotencyKey } : {},
        });
        if (r.status === 202) accepted.set(r.body.run.id, workflow);
        return r;
      };
      const burst = async (quick: number, slowRuns: number) => {
        const replies = await Promise.all([...Array(quick).fill(WF.quick), ...Array(slowRuns).fill(WF.slow)].map((w) => post(w)));
        for (const r of replies) assert.is(r.status, 202, `POST /runs before the restart: ${r.status} ${r.text}${why()}`);
      };
      const ready = () =>
        waitFor('GET /readyz to answer 200 again', async () => (await request(url, 'GET', '/readyz', { timeoutMs: 3_000 })).status === 200, 30_000, 200).catch(
          (err) => {
            throw new Error(`${(err as Error).message}${why()}`);
          },
        );

      /** What the service answers while the database is down: never a crash, always an error envelope. */
      const probeOutage = async (ms: number, idempotencyKey: string, someRun: string) => {
        const end = Date.now() + ms;
        let probes = 0;
        while (probes === 0 || Date.now() < end) {
          probes++;
          const [health, readyz, postRun, getRun] = await Promise.all([
            request(url, 'GET', '/healthz', { timeoutMs: 5_000 }),
            request(url, 'GET', '/readyz', { timeoutMs: 5_000 }),
            post(WF.quick, idempotencyKey),
            request(url, 'GET', `/v1/runs/${someRun}`, { key: PAYER_KEY, timeoutMs: 10_000 }),
          ]);
          assert.ok(svc!.alive(), `the service process died while Postgres was down${why()}`);
          assert.is(health.status, 200, `/healthz while Postgres is down: ${health.status} ${health.text}`);
          assert.is(readyz.status, 503, `/readyz while Postgres is down: ${readyz.status} ${readyz.text}`);
          assert.is(readyz.body?.checks?.database, false);
          for (const [what, r] of [
            ['POST /runs', postRun],
            ['GET /runs/{id}', getRun],
          ] as const) {
            assert.ok(r.status >= 500 && r.status <= 599, `${what} while Postgres is down answered ${r.status}: ${r.text}`);
            assert.type(r.body?.error?.code, 'string', `${what} while Postgres is down: no error envelope: ${r.text}`);
          }
          await sleep(250);
        }
        return probes;
      };

      // Round 1: a clean restart (fast shutdown terminates every session) with 4 quick and 4 delayed runs
      // in flight. It stays down past the delay, so the delayed runs' timers fall due during the outage.
      await burst(4, 4);
      const firstRun = [...accepted.keys()][0]!;
      await cluster.stop('fast');
      await probeOutage(2_500, 'outage-fast', firstRun);
      await cluster.start();
      await ready();

      // The request refused during the outage, sent again with the same Idempotency-Key, is accepted once.
      const retried = await post(WF.quick, 'outage-fast');
      assert.is(retried.status, 202, `POST /runs retried after the restart: ${retried.status} ${retried.text}${why()}`);

      // Round 2: a crash of the server (immediate shutdown: no checkpoint, recovery at start).
      await burst(3, 2);
      await cluster.stop('immediate');
      await probeOutage(1_000, 'outage-immediate', firstRun);
      await cluster.start();
      await ready();
      const again = await post(WF.quick, 'outage-immediate');
      assert.is(again.status, 202, `POST /runs retried after the second restart: ${again.status} ${again.text}${why()}`);

      // Rapid restarts, each cutting the transactions of requests still in flight (the requests carry
      // Idempotency-Keys: one that failed may still have committed, and its retry must find that run).
      const unsure = new Set<string>();
      for (let round = 0; round < 4; round++) {
        const keys = Array.from({ length: 6 }, (_, i) => `flurry-${round}-${i}`);
        const inFlight = keys.map((k, i) => post(i % 3 ? WF.quick : WF.slow, k).then((r) => r.status !== 202 && unsure.add(k)));
        await sleep(15 * round);
        await cluster.stop(round % 2 ? 'immediate' : 'fast');
        await Promise.all(inFlight);
        assert.ok(svc.alive(), `the service process died${why()}`);
        await cluster.start();
        await ready();
      }
      for (const k of unsure) {
        const r = await post(k.endsWith('0') || k.endsWith('3') ? WF.slow : WF.quick, k);
        assert.is(r.status, 202, `POST /runs retried with Idempotency-Key ${k}: ${r.status} ${r.text}${why()}`);
      }

      // New work is accepted and runs as usual.
      await burst(2, 0);

      const ids = [...accepted.keys()];
      await waitFor(
        'every accepted run to reach a terminal state',
        async () => {
          for (const id of ids) {
            const r = await request(url, 'GET', `/v1/runs/${id}`, { key: PAYER_KEY });
            if (r.status !== 200 || !TERMINAL.includes(r.body.status)) return false;
          }
          return true;
        },
        60_000,
        250,
      ).catch((err) => {
        throw new Error(`${(err as Error).message}${why()}`);
      });
      assert.ok(svc.alive(), `the service process died${why()}`);
      assert.is((await request(url, 'GET', '/readyz')).status, 200);

      db = new pg.Client({ connectionString: cluster.url('wr_faults') });
      await db.connect();
      const client = db;
      const q: Q = async (sql, params = []) => (await client.query(dollarParams(sql), params)).rows;

      // Exactly the accepted runs exist (the requests refused during the outages left nothing behind),
      // each completed, settled and charged its price once.
      const runs = await q('select id, workflow_id, status, outcome, billing_status, charge_usd, cap_usd, hold_usd, steps_executed from runs');
      assert.equal(runs.map((r) => r.id).sort(), [...ids].sort(), 'the runs in the database are not the accepted ones');
      assert.is(ids.length, 8 + 1 + 5 + 1 + 24 + 2);
      let charged = 0;
      for (const r of runs) {
        const quick = r.workflow_id === WF.quick;
        const charge = quick ? QUICK_CHARGE : SLOW_CHARGE;
        assert.equal([r.status, r.outcome, r.billing_status], ['completed', 'completed', 'settled'], `run ${r.id}`);
        assert.is(micros(r.charge_usd), charge, `run ${r.id} charge`);
        assert.is(micros(r.cap_usd), charge, `run ${r.id}: the spend-cap reservation was not replaced by the charge`);
        assert.is(Number(r.steps_executed), quick ? 3 : 2, `run ${r.id} steps`);
        charged += charge;

        const events = (await q('select sequence, type, node_id from run_events where run_id = ? order by sequence', [r.id])).map(
          (e): EventRow => ({ sequence: Number(e.sequence), type: e.type, nodeId: e.node_id }),
        );
        assertRunLog(r.id, events, 'run.completed', quick ? QUICK_NODES : SLOW_NODES);

        const ledger = await q('select kind, amount_usd from ledger_entries where run_id = ? order by id', [r.id]);
        assert.equal(
          ledger.map((l) => [l.kind, micros(l.amount_usd)]),
          [
            ['hold', -charge],
            ['release', charge],
            ['charge', -charge],
          ],
          `run ${r.id}: ledger rows`,
        );
      }
      const [wallet] = await q('select balance_usd, held_usd from wallets where account_id = ?', [ACCOUNT.payer]);
      assert.is(micros(wallet!.balance_usd), micros('20.000000') - charged, 'wallet balance');
      assert.is(micros(wallet!.held_usd), 0, 'wallet still holds money');
      const counts = await q(`select id, ${RUNS_COUNT_SQL} as runs_count from workflows w order by id`);
      assert.equal(
        counts.map((c) => [c.id, Number(c.runs_count)]),
        [WF.quick, WF.slow].map((w) => [w, [...accepted.values()].filter((x) => x === w).length]),
        'workflows.runs_count',
      );
    } finally {
      await db?.end().catch(() => undefined);
      await svc?.kill();
      await cluster.destroy();
      rmSync(dir, { recursive: true, force: true });
    }
  });

// ---------------------------------------------------------------------------------------------------
// 2. A webhook endpoint down for a while

const WEBHOOK_DOWN =
  'a webhook endpoint that refuses connections, then answers 503, receives every terminal event once it recovers: signed, under the webhook-id of its failed attempt, on the retry schedule, and never again after a 2xx';

t(WEBHOOK_DOWN, async () => {
  const port = await freePort(); // nothing listens there yet: connection refused
  const secret = `whsec_${randomBytes(24).toString('base64')}`;
  const dir = mkdtempSync(join(tmpdir(), 'wr-faults-hooks-'));
  const catalogFile = join(dir, 'catalog.json');
  writeFileSync(
    catalogFile,
    JSON.stringify({
      pricing: { stepUsd: STEP },
      accounts: [
        { handle: 'creator', id: ACCOUNT.creator },
        { handle: 'payer', id: ACCOUNT.payer, walletUsd: '5.000000', apiKeys: [key(PAYER_KEY)], webhooks: [{ url: `http://127.0.0.1:${port}/payer`, secret }] },
        { handle: 'broke', id: ACCOUNT.broke, walletUsd: '0.000000', apiKeys: [key(BROKE_KEY)], webhooks: [{ url: `http://127.0.0.1:${port}/broke`, secret }] },
      ],
      workflows: [QUICK, slow(30)],
    }),
  );
  let app: TestApp | undefined;
  let receiver: Server | undefined;
  try {
    // The real app: HTTP, the embedded engine and the webhook dispatcher it starts (production schedule).
    app = await startTestApp({
      catalog: catalogFile,
      env: { WEBHOOK_ALLOW_INSECURE: '1', ALLOW_PRIVATE_NETWORK: '1' },
      engine: (deps) => new EmbeddedEngine(deps),
    });
    const api = app;
    const em = () => api.deps.orm.em.fork();
    const deliveries = async (runIds: string[]) =>
      em().execute<Record<string, any>[]>(
        `select id, run_id, event_type, created_at, status, attempts, last_status_code, last_error from webhook_deliveries where run_id in (${runIds.map(() => '?').join(',')})`,
        runIds,
      );

    /** One run of each terminal kind: completed, cancelled (while suspended) and failed (insufficient funds). */
    const threeRuns = async () => {
      const ok = await api.call('POST', '/runs', { key: PAYER_KEY, body: { workflow: WF.quick } });
      const cancel = await api.call('POST', '/runs', { key: PAYER_KEY, body: { workflow: WF.slow } });
      const broke = await api.call('POST', '/runs', { key: BROKE_KEY, body: { workflow: WF.quick } });
      for (const r of [ok, cancel, broke]) assert.is(r.status, 202, r.text);
      const c = await api.call('POST', `/runs/${cancel.body.run.id}/cancel`, { key: PAYER_KEY });
      assert.ok(c.status < 300, `cancel: ${c.status} ${c.text}`);
      return new Map<string, string>([
        [ok.body.run.id, 'completed'],
        [cancel.body.run.id, 'cancelled'],
        [broke.body.run.id, 'failed'],
      ]);
    };

    // Phase 1: the endpoint is down. Each terminal event's first attempt is refused and recorded.
    const groupA = await threeRuns();
    const refused = await waitFor(
      'the first delivery attempt of each run of group A to fail',
      async () => {
        const rows = await deliveries([...groupA.keys()]);
        return rows.length === 3 && rows.every((r) => Number(r.attempts) === 1) && rows;
      },
      20_000,
    );
    const refusedId = new Map<string, string>();
    for (const r of refused) {
      assert.is(r.status, 'pending', `delivery ${r.id}`);
      assert.is(r.last_status_code, null);
      assert.match(String(r.last_error), /ECONNREFUSED|refused/i, `delivery ${r.id}: ${r.last_error}`);
      refusedId.set(String(r.run_id), String(r.id));
    }

    // Phase 2: the endpoint is up but answers 503 to the first attempt of every message it has not seen
    // (group A's first contact is its retry, which is answered 204).
    const hits: { at: number; runId: string; id: string; status: number; path: string; headers: IncomingHttpHeaders; body: string }[] = [];
    const seen = new Set<string>();
    receiver = createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (c: string) => (body += c));
      req.on('end', () => {
        const id = String(req.headers['webhook-id']);
        let runId = '';
        try {
          runId = String(JSON.parse(body).data.id);
        } catch {
          /* asserted below: every body parses */
        }
        const status = groupA.has(runId) || seen.has(id) ? 204 : 503;
        seen.add(id);
        hits.push({ at: Date.now(), runId, id, status, path: req.url ?? '', headers: req.headers, body });
        res.writeHead(status).end();
      });
    });
    const server = receiver;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
    const groupB = await threeRuns();
    const all = new Map([...groupA, ...groupB]);

    // Every terminal event ends delivered: A after one refused attempt, B after one 503 (each retried
    // by the production schedule's first backoff, 5 s).
    await waitFor(
      'all six deliveries to be delivered',
      async () => {
        const rows = await deliveries([...all.keys()]);
        return rows.length === 6 && rows.every((r) => r.status === 'delivered') && rows;
      },
      60_000,
      200,
    ).catch(async (err) => {
      throw new Error(
        `${(err as Error).message}: ${JSON.stringify(await deliveries([...all.keys()]), null, 1)}\nhits: ${JSON.stringify(hits.map((h) => [h.runId, h.status]))}`,
      );
    });
    // Several dispatcher ticks later nothing more has been sent.
    const settled = hits.length;
    await sleep(2_500);
    assert.is(hits.length, settled, 'a delivered event was sent again');

    const rows = await deliveries([...all.keys()]);
    const verifier = new Webhook(secret);
    for (const [runId, status] of all) {
      const run = await api.call('GET', `/runs/${runId}`, { key: status === 'failed' ? BROKE_KEY : PAYER_KEY });
      assert.is(run.body.status, status, `run ${runId}`);
      const mine = rows.filter((r) => r.run_id === runId);
      assert.is(mine.length, 1, `run ${runId}: ${mine.length} outbox rows`);
      const row = mine[0]!;
      assert.is(row.event_type, `run.${status}`);
      assert.is(Number(row.attempts), 2, `run ${runId}: attempts`);
      const got = hits.filter((h) => h.runId === runId);
      assert.equal(
        got.map((h) => h.status),
        groupA.has(runId) ? [204] : [503, 204],
        `run ${runId}: answers`,
      );
      const body = `{"type":"run.${status}","timestamp":${JSON.stringify(isoOrNull(row.created_at))},"data":${run.text}}`;
      for (const h of got) {
        assert.is(h.id, row.id, `run ${runId}: webhook-id ${h.id} is not its outbox id ${row.id}`);
        assert.is(h.body, body, `run ${runId}: the body is not the run as GET /runs/{id} shows it, stamped with its outbox row's time`);
        assert.is(h.path, status === 'failed' ? '/broke' : '/payer');
        const msg = verifier.verify(h.body, h.headers as Record<string, string>) as { type: string; data: { id: string; status: string } };
        assert.equal([msg.type, msg.data.id, msg.data.status], [`run.${status}`, runId, status]);
      }
      if (groupA.has(runId)) {
        assert.is(got[0]!.id, refusedId.get(runId), `run ${runId}: delivered under another id than its refused attempt`);
      } else {
        const [first, second] = got as [(typeof got)[0], (typeof got)[0]];
        assert.ok(Number(second.headers['webhook-timestamp']) >= Number(first.headers['webhook-timestamp']));
        assert.ok(second.at - first.at >= 4_000, `run ${runId}: retried ${second.at - first.at} ms after a 503, before the 5 s backoff`);
      }
    }
    assert.is(hits.length, 3 + 6);
  } finally {
    if (receiver) await new Promise((r) => receiver!.close(r));
    await app?.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

// ---------------------------------------------------------------------------------------------------
// 3. The process killed inside the settlement transaction

const SETTLE_KILL =
  'the process killed as it sends the statement that finishes and settles a wallet-funded and a bundle-funded run: after a restart each run ends once and wallet, ledger, bundle, spend cap and outbox show exactly one settlement';
const SETTLE_KILL_COMMIT_SENT =
  'on a server, the process killed once its finishing statement was sent (waiting on a row lock): the server commits it once, and the restart finds those runs settled and changes nothing';

/**
 * Where the kill lands. The runs are computed in memory, so each is started, finished and settled, with
 * its outbox, by ONE statement, its own transaction (src/sql/finish-runs.ts). `before-sent`:
 * as that statement is about to be sent: nothing of it commits. `commit-sent` (server only): the
 * statement is in the server, blocked on the test's lock on the tally rows it also counts runs on; it
 * commits when the lock goes, with its client gone.
 */
type SettleKill = 'before-sent' | 'commit-sent';

/** The text the statement that ends runs starts with (FUND_RUNS starts as it does, up to its calls' fields). */
const FINISHING = String.raw`with recursive call as \(\s+select \* from jsonb_to_recordset\(\$1::jsonb\)\s+as call\(ord bigint, run_id uuid, admitted`;

interface CrashChild {
  proc: ChildProcessWithoutNullStreams;
  /** Lines starting with `prefix` (without it), once `n` of them have been printed. */
  lines(prefix: string, n?: number, ms?: number): Promise<string[]>;
  exited: Promise<void>;
}

function crashChild(args: string[], env: Record<string, string> = {}): CrashChild {
  const proc = spawn(process.execPath, ['--import', 'tsx', 'test/helpers/engine-crash-child.ts', ...args], {
    env: { ...process.env, ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  let exitedFlag = false;
  proc.stdout.on('data', (c: Buffer) => (out += c.toString()));
  proc.stderr.on('data', (c: Buffer) => (err += c.toString()));
  const exited = new Promise<void>((r) => proc.once('exit', () => ((exitedFlag = true), r())));
  const lines = async (prefix: string, n = 1, ms = 60_000) => {
    const pick = () =>
      out
        .split('\n')
        .filter((l) => l.startsWith(prefix))
        .map((l) => l.slice(prefix.length));
    return waitFor(
      `${n} "${prefix.trim()}" line(s) from the crash child`,
      async () => {
        const got = pick();
        if (got.length >= n) return got.slice(0, n);
        if (exitedFlag)
          throw new Error(
            `the crash child exited (${proc.exitCode ?? proc.signalCode}) before ${n} "${prefix.trim()}" line(s):\n${out.slice(-2000)}\n${err.slice(-3000)}`,
          );
        return null;
      },
      ms,
      20,
    );
  };
  return { proc, lines, exited };
}

t(SETTLE_KILL, () => settleKill('before-sent'));

t(SETTLE_KILL_COMMIT_SENT, async () => {
  if (!process.env.DATABASE_URL) {
    console.log('  (skipped on PGlite: a statement waiting on a lock of another session needs a Postgres server)');
    return;
  }
  await settleKill('commit-sent');
});

async function settleKill(variant: SettleKill): Promise<void> {
  const server = process.env.DATABASE_URL;
  const blocked = variant === 'commit-sent';
  const dataDir = mkdtempSync(join(tmpdir(), 'wr-faults-settle-'));
  const children: CrashChild[] = [];
  let locker: pg.Client | undefined;
  let observer: pg.Client | undefined;
  let own: Orm | undefined;
  try {
    if (server) await resetDb(await testOrm());
    const catalog = JSON.stringify({
      pricing: { stepUsd: STEP },
      accounts: [
        { handle: 'creator', id: ACCOUNT.creator },
        {
          handle: 'payer',
          id: ACCOUNT.payer,
          walletUsd: '1.000000',
          apiKeys: [key(PAYER_KEY, { spendCap: { window: 'lifetime', usd: '1.000000' } })],
          webhooks: [{ url: 'https://127.0.0.1:9/payer', secret: 'whsec_c2V0dGxlbWVudC1mYXVsdC10ZXN0LTE=' }],
        },
        {
          handle: 'bundler',
          id: ACCOUNT.bundler,
          walletUsd: '1.000000',
          apiKeys: [key(BUNDLER_KEY)],
          webhooks: [{ url: 'https://127.0.0.1:9/bundler', secret: 'whsec_c2V0dGxlbWVudC1mYXVsdC10ZXN0LTI=' }],
        },
      ],
      workflows: [QUICK, { ...QUICK, id: WF.bundled, name: 'Bundled', priceUsd: '0.030000' }],
      purchases: [{ account: 'bundler', workflow: WF.bundled, version: 'v1' }],
      bundles: [{ account: 'bundler', workflow: WF.bundled, version: 'v1', runs: 3, usdPerRun: '0.020000' }],
    });
    const BUNDLE_CHARGE = micros('0.020000');

    const killBefore: Record<string, string> = blocked ? {} : { KILL_BEFORE_SQL: `^${FINISHING}` };
    const first = crashChild(['settle', dataDir, catalog, `${PAYER_KEY}=${WF.quick}`, `${BUNDLER_KEY}=${WF.bundled}`], killBefore);
    children.push(first);
    await first.lines('READY');
    if (blocked) {
      locker = new pg.Client({ connectionString: server });
      await locker.connect();
      await locker.query('begin');
      // The tally rows every completion of these workflows adds to (one per shard), locked: the
      // finishing statement, which also counts the completed runs, waits there.
      await locker.query(`insert into workflow_run_tallies (workflow_id, shard, runs) select w, s, 0 from unnest($1::uuid[]) w, generate_series(0, 15) s`, [
        [WF.quick, WF.bundled],
      ]);
      await locker.query('select 1 from workflow_run_tallies where workflow_id = any($1) for update', [[WF.quick, WF.bundled]]);
      // pg_stat_activity is read from another session: inside the locker's transaction it is a snapshot.
      observer = new pg.Client({ connectionString: server });
      await observer.connect();
    }
    first.proc.stdin.write('go\n');
    const [walletRun, bundleRun] = (await first.lines('RUN ', 2)).map((l) => l.trim()) as [string, string];
    const killed: string[] = [];

    if (blocked) {
      const lock = observer!;
      // The finishing statement (both runs, or the first while the second waits for it to come back).
      const waiting = await waitFor(
        'the finishing statement to wait on the tally row locks',
        async () => {
          const rows = (
            await lock.query(
              `select pid from pg_stat_activity
                where datname = current_database() and wait_event_type = 'Lock' and (query ~ $1 or query ~ 'finish_runs')`,
              [FINISHING],
            )
          ).rows;
          return rows.length >= 1 && rows.map((r) => Number(r.pid));
        },
        30_000,
      ).catch(async (err) => {
        const activity = await lock.query(
          `select pid, state, wait_event_type, wait_event, left(query, 160) as query from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()`,
        );
        throw new Error(`${(err as Error).message}\n${JSON.stringify(activity.rows, null, 1)}`);
      });
      // The statement is executing: it holds the locks of the tables it writes.
      const locks = (
        await lock.query(
          `select l.pid, c.relname from pg_locks l join pg_class c on c.oid = l.relation
            where l.pid = any($1) and l.granted and l.mode = 'RowExclusiveLock'`,
          [waiting],
        )
      ).rows;
      for (const pid of waiting) {
        const tables = locks.filter((l) => Number(l.pid) === pid).map((l) => l.relname);
        for (const t of ['runs', 'run_event_batches', 'webhook_deliveries']) assert.ok(tables.includes(t), `backend ${pid} has not written ${t}: ${tables}`);
      }
      assert.ok(
        waiting.some((pid) => ['wallets', 'ledger_entries'].every((t) => locks.some((l) => Number(l.pid) === pid && l.relname === t))),
        `no waiting transaction has settled the wallet: ${JSON.stringify(locks)}`,
      );
      first.proc.kill('SIGKILL');
      await first.exited;
      await locker!.query('rollback'); // the orphaned statement goes on and commits: it is in the server
      await waitFor(
        "the killed process's transactions to end",
        async () => (await lock.query('select count(*)::int as n from pg_stat_activity where pid = any($1)', [waiting])).rows[0].n === 0,
        20_000,
      );
      killed.push(walletRun, bundleRun);
    } else {
      const [line] = await first.lines('KILLING ');
      const params = JSON.parse(line!).params as unknown[];
      await first.exited;
      assert.is(first.proc.signalCode, 'SIGKILL');
      // Its first array holds the ids of the runs it finishes.
      killed.push(...(params[0] as string[]));
    }

    // A new process on the same database: first what it finds, then it drives the runs to their end.
    const second = crashChild(['finish', dataDir, walletRun, bundleRun]);
    children.push(second);
    const [beforeLine] = await second.lines('BEFORE ');
    const before = JSON.parse(beforeLine!) as { id: string; status: string; billing_status: string; charge_usd: string | null; ledger: { kind: string }[] }[];
    // (commit-sent) The runs of a second statement, waiting for the blocked one to come back, were never sent.
    if (blocked)
      assert.ok(
        before.some((b) => b.status === 'completed'),
        `the blocked statement committed: ${JSON.stringify(before)}`,
      );
    for (const b of before) {
      if (!killed.includes(b.id)) continue; // (self-kill) the other run may have ended before the kill, or not
      if (blocked && b.status !== 'pending') {
        // In the statement the server committed after the kill, once: terminal and settled before the restart.
        assert.equal([b.status, b.billing_status], ['completed', 'settled'], `run ${b.id} before the restart`);
        assert.equal(
          b.ledger.map((l) => l.kind),
          b.id === walletRun ? ['hold', 'release', 'charge'] : [],
          `run ${b.id}: ledger before the restart`,
        );
        continue;
      }
      assert.not.ok(TERMINAL.includes(b.status), `run ${b.id} is ${b.status} after a kill before its commit`);
      assert.is(b.billing_status, 'pending');
      assert.is(b.charge_usd, null);
      // A run started in a transaction of its own committed its hold; one started, run and settled in one
      // transaction (in-memory steps only) committed nothing and is still an admitted pending run.
      const heldBefore = b.id === walletRun && b.status === 'running';
      assert.ok(b.status === 'running' || b.status === 'pending', `run ${b.id} is ${b.status} before the restart`);
      assert.equal(
        b.ledger.map((l) => l.kind),
        heldBefore ? ['hold'] : [],
        `run ${b.id}: ledger before the restart`,
      );
    }
    await second.lines('DONE ', 2);
    await waitFor('the finishing child to exit', async () => second.proc.exitCode !== null || second.proc.signalCode !== null || null, 20_000);
    assert.is(second.proc.exitCode, 0);

    let q: Q;
    if (server) {
      const shared = await testOrm();
      q = (sql, params = []) => shared.em.fork().execute(sql, params);
    } else {
      const opened = await openOrm({ dataDir });
      own = opened;
      q = (sql, params = []) => opened.em.fork().execute(sql, params);
    }

    const runs = await q('select id, status, outcome, billing_status, funding, charge_usd, cap_usd from runs order by id');
    assert.is(runs.length, 2);
    for (const r of runs) {
      const bundled = r.id === bundleRun;
      const charge = bundled ? BUNDLE_CHARGE : QUICK_CHARGE;
      assert.equal([r.status, r.outcome, r.billing_status, r.funding], ['completed', 'completed', 'settled', bundled ? 'bundle' : 'wallet'], `run ${r.id}`);
      assert.is(micros(r.charge_usd), charge, `run ${r.id} charge`);
      assert.is(micros(r.cap_usd), charge, `run ${r.id}: the spend-cap reservation is not the charge`);
      const events = (await q('select sequence, type, node_id from run_events where run_id = ? order by sequence', [r.id])).map(
        (e): EventRow => ({ sequence: Number(e.sequence), type: String(e.type), nodeId: (e.node_id as string | null) ?? null }),
      );
      assertRunLog(String(r.id), events, 'run.completed', QUICK_NODES);
      const ledger = await q('select kind, amount_usd from ledger_entries where run_id = ? order by id', [r.id]);
      assert.equal(
        ledger.map((l) => [l.kind, micros(l.amount_usd)]),
        bundled
          ? []
          : [
              ['hold', -charge],
              ['release', charge],
              ['charge', -charge],
            ],
        `run ${r.id}: ledger`,
      );
      const outbox = await q('select event_type from webhook_deliveries where run_id = ?', [r.id]);
      assert.equal(
        outbox.map((o) => o.event_type),
        ['run.completed'],
        `run ${r.id}: webhook outbox`,
      );
    }
    const wallets = await q('select account_id, balance_usd, held_usd from wallets where account_id in (?, ?) order by account_id', [
      ACCOUNT.payer,
      ACCOUNT.bundler,
    ]);
    assert.equal(
      wallets.map((w) => [w.account_id, micros(w.balance_usd), micros(w.held_usd)]),
      [
        [ACCOUNT.payer, micros('1.000000') - QUICK_CHARGE, 0],
        [ACCOUNT.bundler, micros('1.000000'), 0],
      ],
      'wallets',
    );
    const [bundle] = await q('select runs_left from bundles where account_id = ?', [ACCOUNT.bundler]);
    assert.is(Number(bundle!.runs_left), 2, 'bundle runs left');
    const counts = await q(`select id, ${RUNS_COUNT_SQL} as runs_count from workflows w where id in (?, ?) order by id`, [WF.quick, WF.bundled]);
    assert.equal(
      counts.map((c) => [c.id, Number(c.runs_count)]),
      [
        [WF.quick, 1],
        [WF.bundled, 1],
      ].sort(),
      'workflows.runs_count',
    );
  } finally {
    for (const c of children) {
      if (c.proc.exitCode === null && c.proc.signalCode === null) c.proc.kill('SIGKILL');
      await Promise.race([c.exited, sleep(5_000)]);
    }
    await locker?.end().catch(() => undefined);
    await observer?.end().catch(() => undefined);
    await own?.close(true).catch(() => undefined);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

t.run();
