import { randomBytes, randomUUID } from 'node:crypto';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { findTemporalCli, startDevServer, type DevServer } from '../../src/engine/temporal/dev-server.ts';
import { TemporalRunClient } from '../../src/engine/temporal/client.ts';
import { TemporalEngine } from '../../src/engine/temporal/temporal-engine.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { startProviderStub, type ProviderStub } from '../helpers/provider-stub.ts';
import { countTemporal, temporalAddress } from '../helpers/temporal.ts';
import { micros, sleep, waitFor } from './helpers/faults.ts';
import {
  assertCompletedOnce,
  assertWallet,
  runStatuses,
  slowEndpoint,
  startWorker,
  waitNodeStarted,
  waitTerminal,
  type SlowEndpoint,
  type WorkerProcess,
} from './helpers/temporal-faults.ts';

/**
 * Faults on the Temporal engine, with real parts only: a private Temporal dev server persisted to a
 * file (so it can be killed and started again on the same port and file), a Postgres server
 * (DATABASE_URL), the API in this process (ENGINE=temporal without a worker) and the workers as
 * separate `src/worker.ts` processes, killed with SIGKILL or stopped with SIGTERM mid-run:
 *
 * 1. a worker killed while a step (a slow HTTP request) is in flight: a new worker re-executes it;
 * 2. a worker killed while the run waits on a delay: a new worker resumes it once the timer fires;
 * 3. the Temporal server killed mid-run and started again on the same file;
 * 4. 50 runs in flight while one worker stops gracefully and the next is killed.
 *
 * Each run must end completed exactly once and be charged exactly once (run row, ledger, wallet), with
 * a gap-free log in which every node started and completed once.
 */

const t = suite('temporal faults');
const NAME = 'temporal faults';

const STEP = '0.000100';
const ACCOUNT = { creator: 'fb000000-0000-4000-8000-0000000000c0', payer: 'fb000000-0000-4000-8000-0000000000c1' } as const;
const WF = {
  step: 'fb000000-0000-4000-8000-00000000f001',
  delay: 'fb000000-0000-4000-8000-00000000f002',
  mixed: 'fb000000-0000-4000-8000-00000000f003',
  llm: 'fb000000-0000-4000-8000-00000000f004',
} as const;
const PAYER_KEY = 'wr_tfaults_payer_key_4e2b';
const WALLET = micros('20.000000');
const SLOW_BODY = 'slow body';

const STEP_RUN = {
  charge: micros('0.010300'), // price + 3 steps (a, fetch, b)
  steps: 3,
  nodes: { started: ['a', 'fetch', 'b'], completed: ['a', 'fetch', 'b', 'out'] },
  output: `early, ${SLOW_BODY}!`,
};
const DELAY_RUN = {
  charge: micros('0.010200'), // price + 2 steps (a, b)
  steps: 2,
  nodes: { started: ['a', 'wait', 'b'], completed: ['a', 'wait', 'b', 'out'] },
  output: 'early, then late',
};
/** 30 chunks, 150 ms apart: a stream of several seconds, cut by the kill. */
const LLM_CHUNKS = Array.from({ length: 30 }, (_, i) => `word${i} `);
const LLM_RUN = {
  // price + 1 step + the stub's usage (11 input and 7 output tokens at 1000 / 2000 USD per million)
  charge: micros('0.010000') + micros('0.000100') + micros('0.011000') + micros('0.014000'),
  hold: micros('0.010100'), // the hold covers the price and the steps; tokens are charged at the end
  steps: 1,
  nodes: { started: ['llm'], completed: ['llm', 'out'] },
  output: LLM_CHUNKS.join(''),
};
const MIXED_RUN = {
  charge: micros('0.010300'),
  steps: 3,
  nodes: { started: ['a', 'fetch', 'wait', 'b'], completed: ['a', 'fetch', 'wait', 'b', 'out'] },
  output: `early, ${SLOW_BODY}, then late`,
};

function catalog(slowUrl: string, delaySeconds: number) {
  const wf = (id: string, name: string, nodes: unknown[]) => ({
    id,
    owner: 'creator',
    name,
    runModel: 'per_run',
    priceUsd: '0.010000',
    versions: [{ label: 'v1', graph: { nodes } }],
  });
  const a = { id: 'a', kind: 'text.template', template: 'early' };
  return {
    pricing: { stepUsd: STEP, models: { 'gpt-4o-mini': { input: '1000', output: '2000' } } },
    accounts: [
      { handle: 'creator', id: ACCOUNT.creator },
      {
        handle: 'payer',
        id: ACCOUNT.payer,
        walletUsd: '20.000000',
        apiKeys: [{ secret: PAYER_KEY, scopes: ['run:execute', 'run:read'], rateLimitPerMinute: 10_000 }],
      },
    ],
    workflows: [
      wf(WF.step, 'Slow step', [
        a,
        { id: 'fetch', kind: 'http.request', method: 'GET', url: slowUrl, after: ['a'] },
        { id: 'b', kind: 'text.template', template: '{{a}}, {{fetch}}!' },
        { id: 'out', kind: 'output', from: 'b', name: 'result', type: 'text' },
      ]),
      wf(WF.delay, 'Delay', [
        a,
        { id: 'wait', kind: 'delay', seconds: delaySeconds, after: ['a'] },
        { id: 'b', kind: 'text.template', template: '{{a}}, then late', after: ['wait'] },
        { id: 'out', kind: 'output', from: 'b', name: 'result', type: 'text' },
      ]),
      wf(WF.mixed, 'Slow step and delay', [
        a,
        { id: 'fetch', kind: 'http.request', method: 'GET', url: slowUrl, after: ['a'] },
        { id: 'wait', kind: 'delay', seconds: delaySeconds, after: ['fetch'] },
        { id: 'b', kind: 'text.template', template: '{{a}}, {{fetch}}, then late', after: ['wait'] },
        { id: 'out', kind: 'output', from: 'b', name: 'result', type: 'text' },
      ]),
      wf(WF.llm, 'Streaming LLM', [
        { id: 'llm', kind: 'llm.chat', provider: 'openai', model: 'gpt-4o-mini', prompt: 'Stream something' },
        { id: 'out', kind: 'output', from: 'llm', name: 'result', type: 'text' },
      ]),
    ],
  };
}

// ---------------------------------------------------------------------------------------------------
// One private Temporal server for the suite (test 3 kills and restarts it), one API and its workers per test.

const DIR = join('.tmp', `temporal-faults-${process.pid}`);
const ENCRYPTION_KEY = randomBytes(32).toString('hex');
let cli = '';
let server: DevServer | null = null;
let port = 0;
let app: TestApp | null = null;
let slow: SlowEndpoint | null = null;
let provider: ProviderStub | null = null;
let workers: WorkerProcess[] = [];
let taskQueue = '';

async function startServer(): Promise<DevServer> {
  server = await startDevServer({ cli, dbFile: join(DIR, 'temporal.db'), ...(port ? { port } : {}), readyTimeoutMs: 60_000 });
  port = Number(server.address.split(':').at(-1));
  return server;
}

/** Environment shared by the API and the workers of one test. */
function env(): Record<string, string> {
  return {
    DATABASE_URL: process.env.DATABASE_URL!,
    ENCRYPTION_KEY,
    TEMPORAL_ADDRESS: server!.address,
    TEMPORAL_TASK_QUEUE: taskQueue,
    ALLOW_PRIVATE_NETWORK: '1',
    RUN_CAPACITY: '64',
    DATA_DIR: DIR,
    OPENAI_API_KEY: 'sk-temporal-faults',
    OPENAI_BASE_URL: provider!.baseURLFor('openai'),
  };
}

/** The API (this process, no worker) on a fresh database and a task queue of its own; a slow endpoint holding `holdMs`. */
async function setUp(holdMs: number, delaySeconds: number): Promise<TestApp> {
  taskQueue = `temporal-faults-${randomUUID()}`;
  slow = await slowEndpoint(holdMs, SLOW_BODY);
  const file = join(DIR, `catalog-${taskQueue}.json`);
  writeFileSync(file, JSON.stringify(catalog(slow.url, delaySeconds)));
  app = await startTestApp({
    catalog: file,
    env: { ...env(), ENGINE: 'temporal', TEMPORAL_WORKER: 'off' },
    engine: (deps) => new TemporalEngine(deps, { admissionIntervalMs: 500, sweepIntervalMs: 1_000, startGraceMs: 2_000 }),
  });
  return app;
}

function worker(name: string): WorkerProcess {
  const w = startWorker(name, env());
  workers.push(w);
  return w;
}

/** What the processes printed, for failure messages. */
function why(): string {
  return workers
    .map((w) => `\n--- worker ${w.name} (${w.alive() ? 'alive' : `exited ${w.child.exitCode ?? w.child.signalCode}`}) ---\n${w.output().slice(-3000)}`)
    .join('');
}

async function postRuns(workflow: string, n: number): Promise<string[]> {
  const replies = await Promise.all(Array.from({ length: n }, () => app!.call('POST', '/runs', { key: PAYER_KEY, body: { workflow, inputs: {} } })));
  for (const r of replies) assert.is(r.status, 202, `POST /runs: ${r.status} ${r.text}`);
  return replies.map((r) => String(r.body.run.id));
}

const ms = (since: number) => `${((Date.now() - since) / 1000).toFixed(1)} s`;

const address = process.env.DATABASE_URL ? temporalAddress(NAME) : null;
const cliPath = findTemporalCli();
if (!process.env.DATABASE_URL) {
  console.log(`  ${NAME}: SKIPPED — needs a Postgres server (DATABASE_URL): the API and the worker processes share one database, which embedded PGlite cannot`);
} else if (address && !cliPath) {
  console.log(`  ${NAME}: SKIPPED — no Temporal CLI to start a private server with (TEMPORAL_CLI)`);
} else if (address && cliPath) {
  cli = cliPath;

  // Should this process die (a timeout), its children must not outlive it.
  process.once('exit', () => {
    for (const w of workers) w.child.kill('SIGKILL');
    server?.child.kill('SIGKILL');
  });

  t.before(async () => {
    mkdirSync(DIR, { recursive: true });
    provider = await startProviderStub({ chunks: LLM_CHUNKS, delayMsBetweenChunks: 150 });
    await startServer();
  });

  t.after.each(async () => {
    await Promise.all(workers.map((w) => w.kill()));
    workers = [];
    await app?.close();
    app = null;
    await slow?.close();
    slow = null;
    // A test that failed while the server was down leaves it down: the next tests get it back.
    if (server && !server.child.killed && server.child.exitCode === null && server.child.signalCode === null) return;
    await startServer();
  });

  t.after(async () => {
    await server?.stop();
    server = null;
    await provider?.close();
    provider = null;
    rmSync(DIR, { recursive: true, force: true });
  });

  t(
    'a worker killed (SIGKILL) while a slow HTTP step is in flight: a new worker process re-executes the step and the run completes once, charged once, with each node started and completed once',
    countTemporal(async () => {
      const started = Date.now();
      const api = await setUp(3_000, 1);
      const first = worker('1');
      const [runId] = await postRuns(WF.step, 1);
      await waitNodeStarted(api.deps.orm, runId!, 'fetch', 90_000, why);
      await waitFor('the request to reach the slow endpoint', async () => slow!.open() >= 1, 20_000, 20);
      await first.kill();
      assert.is(first.child.signalCode, 'SIGKILL');
      assert.is((await runStatuses(api.deps.orm, [runId!])).get(runId!), 'running', 'the run after the kill');

      worker('2');
      await waitTerminal(api.deps.orm, [runId!], 120_000, why);
      await assertCompletedOnce(api.deps.orm, runId!, STEP_RUN);
      assert.is(slow!.hits(), 2, 'the step was not re-executed exactly once');
      await assertWallet(api.deps.orm, ACCOUNT.payer, WALLET - STEP_RUN.charge);
      const got = await api.call('GET', `/runs/${runId}`, { key: PAYER_KEY });
      assert.equal([got.status, got.body.status], [200, 'completed']);
      console.log(`  ${NAME}: worker killed mid-step: ${ms(started)}`);
    }),
  );

  t(
    "a worker killed (SIGKILL) while an LLM step streams: a new worker process streams the step again, its log continues where the deltas stopped (no text twice), and the run is charged one step and one call's tokens",
    countTemporal(async () => {
      const started = Date.now();
      const api = await setUp(0, 1);
      const first = worker('1');
      const [runId] = await postRuns(WF.llm, 1);
      const deltas = async () =>
        (
          await api.deps.orm.em
            .fork()
            .execute<Record<string, any>[]>(`select data from run_events where run_id = ? and type = 'node.output.delta' order by sequence`, [runId])
        ).map((e) => String((typeof e.data === 'string' ? JSON.parse(e.data) : e.data).text));
      await waitFor('a few deltas of the stream to be published', async () => (await deltas()).join('').split(' ').length > 4, 90_000, 20).catch((err) => {
        throw new Error(`${(err as Error).message}${why()}`);
      });
      await first.kill();
      const cut = (await deltas()).join('');
      assert.ok(cut.length < LLM_RUN.output.length, 'the stream ended before the kill: the fault tested nothing');
      const calls = provider!.requests.length;

      worker('2');
      await waitTerminal(api.deps.orm, [runId!], 120_000, why);
      await assertCompletedOnce(api.deps.orm, runId!, LLM_RUN);
      assert.is((await deltas()).join(''), LLM_RUN.output, 'the streamed deltas are not the output once');
      assert.is(provider!.requests.length, calls + 1, 'the step was not re-executed exactly once');
      await assertWallet(api.deps.orm, ACCOUNT.payer, WALLET - LLM_RUN.charge);
      console.log(`  ${NAME}: worker killed mid-stream: ${ms(started)} (${cut.length} of ${LLM_RUN.output.length} characters streamed before the kill)`);
    }),
  );

  t(
    'a worker killed (SIGKILL) while its run waits on a delay: a new worker process resumes it when the timer fires, and the run completes once, charged once',
    countTemporal(async () => {
      const started = Date.now();
      const api = await setUp(0, 4);
      const first = worker('1');
      const [runId] = await postRuns(WF.delay, 1);
      const suspendedAt = await waitFor(
        'the run to suspend on its timer',
        async () => {
          const [r] = await api.deps.orm.em.fork().execute<Record<string, any>[]>('select status, suspend_reason, resume_at from runs where id = ?', [runId]);
          return r?.status === 'suspended' && r.suspend_reason === 'wait_timer' && new Date(r.resume_at).getTime();
        },
        90_000,
        50,
      ).catch((err) => {
        throw new Error(`${(err as Error).message}${why()}`);
      });
      await first.kill();
      // The timer falls due with no worker at all.
      await sleep(Math.max(0, suspendedAt - Date.now()) + 1_000);
      assert.is((await runStatuses(api.deps.orm, [runId!])).get(runId!), 'suspended', 'the run went on without a worker');

      worker('2');
      await waitTerminal(api.deps.orm, [runId!], 120_000, why);
      await assertCompletedOnce(api.deps.orm, runId!, DELAY_RUN);
      const [ended] = await api.deps.orm.em
        .fork()
        .execute<Record<string, any>[]>(`select ts from run_events where run_id = ? and type = 'node.completed' and node_id = 'wait'`, [runId]);
      assert.ok(new Date(ended!.ts).getTime() >= suspendedAt - 50, 'the delay completed before its due time');
      await assertWallet(api.deps.orm, ACCOUNT.payer, WALLET - DELAY_RUN.charge);
      console.log(`  ${NAME}: worker killed mid-timer: ${ms(started)}`);
    }),
  );

  t(
    'the Temporal server killed (SIGKILL) mid-run and started again on the same port and file: the runs in flight and a run accepted while it was down complete once, charged once',
    countTemporal(async () => {
      const started = Date.now();
      const api = await setUp(3_000, 2);
      worker('1');
      const [inFlight] = await postRuns(WF.mixed, 1);
      await waitNodeStarted(api.deps.orm, inFlight!, 'fetch', 90_000, why);
      await waitFor('the request to reach the slow endpoint', async () => slow!.open() >= 1, 20_000, 20);
      await server!.kill();
      // Accepted (the commit comes first) while Temporal is down; the sweep starts its workflow later.
      const [whileDown] = await postRuns(WF.delay, 1);
      const ready = await api.call('GET', `${api.url}/readyz`, { unchecked: true });
      assert.is(ready.status, 503, `/readyz while Temporal is down: ${ready.status} ${ready.text}`);
      await sleep(3_000);
      await startServer();
      await waitFor(
        'GET /readyz to answer 200 again',
        async () => (await api.call('GET', `${api.url}/readyz`, { unchecked: true })).status === 200,
        30_000,
        250,
      );

      const ids = [inFlight!, whileDown!];
      await waitTerminal(api.deps.orm, ids, 180_000, why);
      await assertCompletedOnce(api.deps.orm, inFlight!, MIXED_RUN);
      await assertCompletedOnce(api.deps.orm, whileDown!, DELAY_RUN);
      await assertWallet(api.deps.orm, ACCOUNT.payer, WALLET - MIXED_RUN.charge - DELAY_RUN.charge);
      assert.ok(workers[0]!.alive(), `the worker process died with the server${why()}`);
      console.log(`  ${NAME}: server restarted mid-run: ${ms(started)} (slow endpoint hit ${slow!.hits()} time(s))`);
    }),
  );

  t(
    'the Temporal client closed after a server restart, while a health check made during the outage is still being retried, closes cleanly: no retry lands on the closed connection',
    countTemporal(async () => {
      const stray: Error[] = [];
      const catchStray = (err: Error) => void stray.push(err);
      process.on('uncaughtException', catchStray);
      const client = new TemporalRunClient({ address: server!.address, namespace: 'default', taskQueue: `temporal-faults-${randomUUID()}` });
      try {
        assert.is(await client.ready(5_000), true, 'ready before the restart');
        await server!.kill();
        assert.is(await client.ready(1_000), false, 'ready while the server is down');
        await startServer();
        await waitFor('the client to see the server again', () => client.ready(2_000), 30_000, 250);
        const closing = Date.now();
        await client.close();
        const closeMs = Date.now() - closing;
        // The SDK retries a failed call from a timer (backoff up to a few seconds): give it the time.
        await sleep(8_000);
        assert.equal(
          stray.map((e) => e.message),
          [],
          'an exception escaped after close()',
        );
        console.log(`  ${NAME}: client closed ${closeMs} ms after the restart's checks`);
      } finally {
        process.off('uncaughtException', catchStray);
        await client.close();
      }
    }),
  );

  t(
    '50 runs in flight while one worker stops gracefully (SIGTERM) and the next is killed (SIGKILL): every run completes once, charged once, and the wallet shows exactly the 50 charges',
    countTemporal(async () => {
      const started = Date.now();
      const api = await setUp(1_500, 2);
      const first = worker('1');
      const ids = await postRuns(WF.mixed, 30);
      await waitFor('10 runs to have their slow step in flight', async () => slow!.hits() >= 10, 120_000, 50).catch((err) => {
        throw new Error(`${(err as Error).message}${why()}`);
      });
      const second = worker('2');
      const terminated = first.terminate(30_000);
      // 20 more accepted while the first worker drains (its running steps get their grace time).
      ids.push(...(await postRuns(WF.mixed, 20)));
      assert.is(await terminated, 0, `the worker did not shut down cleanly on SIGTERM${why()}`);
      const drained = await runStatuses(api.deps.orm, ids);
      const completedAfterTerm = [...drained.values()].filter((s) => s === 'completed').length;

      // Some progress on the second worker, then it crashes with runs in flight.
      const hitsBefore = slow!.hits();
      await waitFor('the second worker to make progress', async () => slow!.hits() >= hitsBefore + 5, 120_000, 50).catch((err) => {
        throw new Error(`${(err as Error).message}${why()}`);
      });
      const before = await runStatuses(api.deps.orm, ids);
      const open = [...before.values()].filter((s) => s !== 'completed').length;
      await second.kill();
      worker('3');

      await waitTerminal(api.deps.orm, ids, 240_000, why);
      for (const id of ids) await assertCompletedOnce(api.deps.orm, id, MIXED_RUN);
      await assertWallet(api.deps.orm, ACCOUNT.payer, WALLET - 50 * MIXED_RUN.charge);
      assert.ok(open > 0, 'no run was in flight when the second worker was killed: the fault tested nothing');
      console.log(
        `  ${NAME}: 50 runs through a SIGTERM and a SIGKILL: ${ms(started)} (${completedAfterTerm} completed at the SIGTERM, ${open} open at the SIGKILL, slow endpoint hit ${slow!.hits()} times)`,
      );
    }),
  );
}

t.run();
