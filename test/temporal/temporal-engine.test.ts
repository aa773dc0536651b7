import { randomBytes, randomUUID } from 'node:crypto';
import pino from 'pino';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { RunMemo } from '../../workflows/definitions.ts';
import { parseCatalog } from '../../src/catalog/parse-catalog.ts';
import { loadCatalog } from '../../src/catalog/load-catalog.ts';
import { loadConfig } from '../../src/config/config.ts';
import type { Orm } from '../../src/db/orm.ts';
import type { RunWorkflowClient } from '../../src/engine/temporal/client.ts';
import { TEMPORAL_STARTED_MARK, TemporalEngine, type TemporalEngineOptions } from '../../src/engine/temporal/temporal-engine.ts';
import { Sealer } from '../../src/security/crypto.ts';
import { authenticateKey } from '../../src/services/auth/authenticate-key.ts';
import type { Deps } from '../../src/runs/deps.ts';
import { InProcessRunEventBus } from '../../src/services/events/bus.ts';
import { cancelRun } from '../../src/runs/cancel-run.ts';
import { startRun } from '../../src/runs/start-run.ts';
import { supplyRunCredentials } from '../../src/runs/supply-run-credentials.ts';
import { resetDb, testOrm } from '../helpers/db.ts';
import { statementsWhile } from '../helpers/statement-log.ts';

/**
 * The Temporal engine's client side (admission, sweep, signals) against the real database, with a fake
 * Temporal client that records what would be sent to Temporal. Several engine instances stand for
 * several API / worker processes sharing one Postgres.
 */

const orm: Orm = await testOrm();
const sealer = new Sealer(randomBytes(32));
const engines: TemporalEngine[] = [];

const OPEN_EXECUTIONS = new Set<string>();

class FakeTemporal implements RunWorkflowClient {
  starts: { memo: RunMemo; admitted: boolean }[] = [];
  /** `admitted` signals. */
  admits: RunMemo[] = [];
  /** Runs whose workflow learned of their admission: started admitted, or signalled. */
  admitted: string[] = [];
  signals: [string, string][] = [];
  /** Open executions: one set for every fake, as one Temporal server is shared by every process. */
  open = OPEN_EXECUTIONS;
  failStart = false;
  failAdmit = false;
  failSignal = false;
  healthy = true;

  async start(memo: RunMemo, opts: { admitted: boolean }) {
    if (this.failStart) throw new Error('temporal is unavailable');
    this.starts.push({ memo: plainMemo(memo), admitted: opts.admitted });
    if (this.open.has(memo.runId)) return 'already_started' as const;
    this.open.add(memo.runId);
    if (opts.admitted) this.admitted.push(memo.runId);
    return 'started' as const;
  }
  async admit(memo: RunMemo) {
    if (this.failAdmit) throw new Error('temporal is unavailable');
    this.admits.push(plainMemo(memo));
    this.admitted.push(memo.runId);
    this.open.add(memo.runId);
    return 'signalled' as const;
  }
  async signal(runId: string, signal: 'credentialsSupplied') {
    if (this.failSignal) throw new Error('temporal is unavailable');
    this.signals.push([signal, runId]);
    return this.open.has(runId);
  }
  async cancel(runId: string) {
    this.signals.push(['cancel', runId]);
    return this.open.has(runId);
  }
  async ready() {
    return this.healthy;
  }
  async close() {}
}

/** What the real client puts in the workflow's memo (it drops the engine's own fields). */
function plainMemo({ runId, accountHandle, workflowId, versionId, workflowName, versionLabel }: RunMemo): RunMemo {
  return { runId, accountHandle, workflowId, versionId, workflowName, versionLabel };
}

function harness(env: Record<string, string> = {}, opts: TemporalEngineOptions = {}) {
  const config = loadConfig({ CATALOG_FILE: 'none', LOG_LEVEL: 'silent', ENGINE: 'temporal', ...env });
  const client = new FakeTemporal();
  const base = { config, orm, log: pino({ level: 'silent' }), sealer, bus: new InProcessRunEventBus(), baseUrl: () => 'http://localhost:8080/v1' };
  const engine = new TemporalEngine(base, { client, admissionIntervalMs: 50, sweepIntervalMs: 100_000, ...opts });
  engines.push(engine);
  const deps: Deps = { ...base, engine };
  return { deps, engine, client };
}

test.after.each(async () => {
  for (const e of engines.splice(0)) await e.stop();
});

async function seed(o: { bobMax?: number } = {}): Promise<{ workflowId: string; versionId: string }> {
  await resetDb(orm);
  const workflowId = randomUUID();
  const versionId = randomUUID();
  const catalog = {
    pricing: { stepUsd: '0.000100' },
    accounts: [
      { handle: 'alice', walletUsd: '10.000000', apiKeys: [{ secret: 'wr_alice_key', scopes: ['run:execute', 'run:read'], rateLimitPerMinute: 1000 }] },
      {
        handle: 'bob',
        walletUsd: '10.000000',
        maxConcurrentRuns: o.bobMax ?? null,
        apiKeys: [{ secret: 'wr_bob_key', scopes: ['run:execute', 'run:read'], rateLimitPerMinute: 1000 }],
      },
    ],
    workflows: [
      {
        id: workflowId,
        owner: 'alice',
        name: 'Temporal engine test',
        runModel: 'free',
        credentialMode: 'byok',
        versions: [
          {
            id: versionId,
            label: 'v1',
            graph: {
              nodes: [
                { id: 'llm', kind: 'llm.chat', provider: 'openai', model: 'gpt-4o-mini', prompt: 'x' },
                { id: 'o', kind: 'output', from: 'llm' },
              ],
            },
          },
        ],
      },
    ],
  };
  await loadCatalog(orm, parseCatalog(JSON.stringify(catalog), 'test'), { sealer });
  return { workflowId, versionId };
}

async function accept(deps: Deps, workflowId: string, who: 'bob' | 'alice' = 'bob'): Promise<string> {
  const { run } = await startRun(deps, await authenticateKey(deps, `Bearer wr_${who}_key`), { body: { workflow: workflowId, inputs: {} } });
  return run.id;
}

async function row(id: string) {
  const [r] = await orm.em
    .fork()
    .execute<Record<string, unknown>[]>('select status, phase, reason, engine, lease_owner, suspend_reason from runs where id = ?', [id]);
  return r as { status: string; phase: string | null; reason: string | null; engine: string; lease_owner: string | null; suspend_reason: string | null };
}

async function until(what: string, probe: () => boolean | Promise<boolean>, ms = 5_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await probe())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

// ---------------------------------------------------------------------------------------------------

test('an accepted run with room is admitted first and its workflow started admitted: one start with a memo, no signal', async () => {
  const { workflowId, versionId } = await seed();
  const { deps, engine, client } = harness();
  await engine.start();
  const id = await accept(deps, workflowId);
  await until('the admitted start', () => client.admitted.includes(id));
  await until('the run marked started', async () => (await row(id)).lease_owner !== null);
  assert.equal(client.starts, [
    { memo: { runId: id, accountHandle: 'bob', workflowId, versionId, workflowName: 'Temporal engine test', versionLabel: 'v1' }, admitted: true },
  ]);
  assert.equal(client.admits, [], 'no admitted signal');
  const r = await row(id);
  assert.is(r.engine, 'temporal', 'the run is a Temporal run');
  assert.is(r.lease_owner, TEMPORAL_STARTED_MARK);
  assert.is(r.status, 'pending');
  assert.is(r.phase, 'starting', 'admitted: the workflow prepares it next');
});

test('RUN_CAPACITY holds when several processes admit at once, and a run that ends admits exactly the next one', async () => {
  const { workflowId } = await seed();
  const processes = [harness({ RUN_CAPACITY: '2' }), harness({ RUN_CAPACITY: '2' }), harness({ RUN_CAPACITY: '2' })];
  await Promise.all(processes.map((p) => p.engine.start()));
  const ids: string[] = [];
  for (let i = 0; i < 6; i++) ids.push(await accept(processes[i % 3]!.deps, workflowId, i % 2 ? 'alice' : 'bob'));
  // Runs whose workflow learned of their admission (a start racing another process's may add a signal).
  const admitted = () => [...new Set(processes.flatMap((p) => p.client.admitted))];
  await until('two admissions', () => admitted().length >= 2);
  await new Promise((r) => setTimeout(r, 300)); // several periodic admissions in every process
  assert.is(admitted().length, 2, 'never more than RUN_CAPACITY in flight');
  assert.equal(admitted().sort(), ids.slice(0, 2).sort(), 'FIFO');
  // The first run ends (cancelled): its capacity goes to the next queued run, and only to it.
  await cancelRun(processes[0]!.deps, null, ids[0]!);
  await until('a third admission', () => admitted().length >= 3);
  await new Promise((r) => setTimeout(r, 300));
  assert.is(admitted().length, 3);
  const firstTwo = ids.slice(0, 2);
  assert.equal(
    admitted().filter((id) => !firstTwo.includes(id)),
    [ids[2]],
    'the next in FIFO order',
  );
  assert.ok(
    processes[0]!.client.signals.some(([s, id]) => s === 'cancel' && id === ids[0]),
    "the cancelled run's workflow was cancelled",
  );
});

test('a per-account max_concurrent_runs is applied by the Temporal admission too', async () => {
  const { workflowId } = await seed({ bobMax: 1 });
  const { deps, engine, client } = harness({ RUN_CAPACITY: '8' });
  await engine.start();
  const b1 = await accept(deps, workflowId);
  const b2 = await accept(deps, workflowId);
  const a1 = await accept(deps, workflowId, 'alice');
  await until('two admissions', () => client.admitted.length >= 2);
  await new Promise((r) => setTimeout(r, 200));
  assert.equal([...client.admitted].sort(), [b1, a1].sort());
  assert.is((await row(b2)).phase, 'queued');
});

test('the sweep starts the workflow of a run whose start was lost and re-signals a lost admission', async () => {
  const { workflowId } = await seed();
  // The API process: its start fails (Temporal down, or it crashed right after the commit), and so
  // does the admission signal.
  const api = harness({}, { background: false });
  api.client.failStart = true;
  api.client.failAdmit = true;
  await api.engine.start();
  const id = await accept(api.deps, workflowId);
  await api.engine.admitOnce();
  let r = await row(id);
  assert.is(r.lease_owner, null, 'not marked started');
  assert.is(r.phase, 'starting', 'admitted in Postgres nonetheless');

  // Another process sweeps (grace 0): starts the workflow as admitted, marks it, signals the admission.
  const other = harness({}, { background: false, startGraceMs: 0 });
  await other.engine.start();
  await other.engine.sweep();
  assert.equal(
    other.client.starts.map((s) => [s.memo.runId, s.admitted]),
    [[id, true]],
  );
  assert.equal(
    other.client.admits.map((m) => m.runId),
    [id],
  );
  r = await row(id);
  assert.is(r.lease_owner, TEMPORAL_STARTED_MARK);
  // A second sweep has nothing left to start (the run is marked); it may re-signal the still
  // unprepared admission, which the workflow ignores.
  await other.engine.sweep();
  assert.is(other.client.starts.length, 1);
});

test('the sweep leaves fresh runs alone (within the grace period)', async () => {
  const { workflowId } = await seed();
  const api = harness({}, { background: false });
  api.client.failStart = true;
  api.client.failAdmit = true;
  await api.engine.start();
  const id = await accept(api.deps, workflowId);
  const other = harness({}, { background: false, startGraceMs: 60_000 });
  await other.engine.start();
  await other.engine.sweep();
  assert.equal(other.client.starts, []);
  assert.is((await row(id)).lease_owner, null);
});

test('credentialsSupplied resumes the wait_signal suspension in Postgres first, then signals the workflow', async () => {
  const { workflowId } = await seed();
  const { deps, engine, client } = harness();
  await engine.start();
  const id = await accept(deps, workflowId);
  await until('admission', () => client.admitted.length === 1);
  // What the workflow's activities did: prepared and suspended for credentials.
  await orm.em.fork().execute(`update runs set status = 'suspended', phase = null, suspend_reason = 'wait_signal' where id = ?`, [id]);
  const publicRun = await supplyRunCredentials(deps, id, [{ provider: 'openai', apiKey: 'sk-buyer' }]);
  assert.is(publicRun.status, 'running', 'the API answers with the run resumed, like the embedded engine');
  assert.equal(client.signals, [['credentialsSupplied', id]]);
  const [ev] = await orm.em.fork().execute<{ type: string }[]>('select type from run_events where run_id = ? order by sequence desc limit 1', [id]);
  assert.is(ev!.type, 'run.resumed');
});

test('a resume whose credentialsSupplied signal was lost is signalled again by the sweep (the wait has no timer)', async () => {
  const { workflowId } = await seed();
  const api = harness({}, { background: false });
  await api.engine.start();
  const id = await accept(api.deps, workflowId);
  await until('admission', () => api.client.admitted.length === 1);
  await orm.em.fork().execute(`update runs set status = 'suspended', phase = null, suspend_reason = 'wait_signal' where id = ?`, [id]);
  api.client.failSignal = true;
  assert.is((await supplyRunCredentials(api.deps, id, [{ provider: 'openai', apiKey: 'sk-buyer' }])).status, 'running');
  assert.equal(api.client.signals, [], 'the signal was lost');
  const other = harness({}, { background: false, startGraceMs: 0 });
  await other.engine.start();
  await other.engine.sweep();
  assert.equal(other.client.signals, [['credentialsSupplied', id]]);
  // Once the run moved on (any later write), the sweep leaves it alone.
  await orm.em.fork().execute(`update runs set status = 'completed' where id = ?`, [id]);
  await other.engine.sweep();
  assert.is(other.client.signals.length, 1);
});

test('a queued run that waited past QUEUE_MAX_WAIT_SECONDS fails at a periodic admission, not charged', async () => {
  const { workflowId } = await seed();
  const { deps, engine, client } = harness({ RUN_CAPACITY: '1', QUEUE_MAX_WAIT_SECONDS: '1' });
  await engine.start();
  const first = await accept(deps, workflowId);
  const second = await accept(deps, workflowId);
  await until('the first admission', () => client.admitted.length === 1);
  await until('the queue timeout', async () => (await row(second)).status === 'failed', 4_000);
  const r = await row(second);
  assert.is(r.reason, 'the run waited too long for capacity');
  assert.equal(client.admitted, [first]);
  assert.equal(
    client.starts.map((s) => [s.memo.runId, s.admitted]),
    [
      [first, true],
      [second, false],
    ],
    'the run without room started queued',
  );
});

test('idle means idle: with no Temporal run queued or in flight the periodic admission, sweep and reconcile send nothing', async () => {
  await seed();
  // Admission every 50 ms and the sweep every 200 ms, were they run on a fixed beat.
  const { engine } = harness({}, { sweepIntervalMs: 200, reconcileIntervalMs: 200 });
  await engine.start();
  await new Promise((r) => setTimeout(r, 200)); // the start's own admission and first check
  const { sql } = await statementsWhile(orm, () => new Promise((r) => setTimeout(r, 1_000)));
  const statements = sql.filter((q) => !/^(begin|commit|rollback)\b/i.test(q.trim()));
  assert.equal(statements, [], 'no statement while idle');
});

test('an idle engine finds a run another process queued without a word at its fallback check, then admits at the busy pace', async () => {
  const { workflowId } = await seed();
  const { engine, client } = harness({}, { idleCheckMs: 300 });
  await engine.start();
  await new Promise((r) => setTimeout(r, 100));
  // Accepted through a process whose engine neither admits nor starts it, nor tells the idle one.
  const silent = harness({}, { background: false });
  const id = await startRun(silent.deps, await authenticateKey(silent.deps, 'Bearer wr_bob_key'), { body: { workflow: workflowId, inputs: {} } }).then(
    (r) => r.run.id,
  );
  await until('the idle engine admits it', () => client.admitted.includes(id), 3_000);
});

test('ready() is the Temporal health check', async () => {
  const { engine, client } = harness({}, { background: false });
  assert.is(await engine.ready(), true);
  client.healthy = false;
  assert.is(await engine.ready(), false);
});

test.run();
