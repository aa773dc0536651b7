import { randomBytes, randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { MockActivityEnvironment } from '@temporalio/testing';
import pino from 'pino';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { parseCatalog } from '../../src/catalog/parse-catalog.ts';
import { loadCatalog } from '../../src/catalog/load-catalog.ts';
import { loadConfig } from '../../src/config/config.ts';
import type { Orm } from '../../src/db/orm.ts';
import { json } from '../../src/db/sql.ts';
import type { GraphNode } from '../../src/domain/graph/types.ts';
import { NullEngine } from '../../src/runs/engine-port.ts';
import { admitQueuedRuns } from '../../src/runs/admit-runs.ts';
import { prepareRun } from '../../src/runs/prepare-run.ts';
import { createActivities, type RunActivities } from '../../src/engine/temporal/activities.ts';
import { Sealer } from '../../src/security/crypto.ts';
import { authenticateKey } from '../../src/services/auth/authenticate-key.ts';
import type { Deps } from '../../src/runs/deps.ts';
import { InProcessRunEventBus } from '../../src/services/events/bus.ts';
import { startRun } from '../../src/runs/start-run.ts';
import { resetDb, testOrm } from '../helpers/db.ts';
import { startProviderStub } from '../helpers/provider-stub.ts';
import { quietTemporalRuntime, silentLogger } from './support.ts';

/**
 * The Temporal activities (src/engine/temporal/activities.ts) run inside @temporalio/testing's
 * MockActivityEnvironment (a real activity Context: heartbeats, cancellation) against the real test
 * database and the real services, called with exactly the arguments the run workflow passes.
 */

quietTemporalRuntime();

const orm: Orm = await testOrm();
const sealer = new Sealer(randomBytes(32));

function harness(env: Record<string, string> = {}) {
  const config = loadConfig({ CATALOG_FILE: 'none', LOG_LEVEL: 'silent', ...env });
  const deps: Deps = {
    config,
    orm,
    log: pino({ level: 'silent' }),
    sealer,
    bus: new InProcessRunEventBus(),
    baseUrl: () => 'http://localhost:8080/v1',
    engine: new NullEngine(),
  };
  const ended: string[] = [];
  const acts = createActivities(deps, { onRunEnded: (id) => ended.push(id) });
  return { deps, acts, ended };
}

async function seed(nodes: GraphNode[], o: { priceUsd?: string; credentialMode?: 'service_hosted' | 'byok' } = {}): Promise<string> {
  await resetDb(orm);
  const workflowId = randomUUID();
  const catalog = {
    pricing: { stepUsd: '0.000100', models: { 'gpt-4o-mini': { input: '0.15', output: '0.60' } } },
    accounts: [
      { handle: 'alice', walletUsd: '10.000000' },
      { handle: 'bob', walletUsd: '10.000000', apiKeys: [{ secret: 'wr_bob_key', scopes: ['run:execute', 'run:read'], rateLimitPerMinute: 1000 }] },
    ],
    workflows: [
      {
        id: workflowId,
        owner: 'alice',
        name: 'Activities test',
        runModel: 'per_run',
        priceUsd: o.priceUsd ?? '0.250000',
        credentialMode: o.credentialMode ?? 'service_hosted',
        versions: [{ id: randomUUID(), label: 'v1', graph: { nodes } }],
      },
    ],
  };
  await loadCatalog(orm, parseCatalog(JSON.stringify(catalog), 'test'), { sealer });
  return workflowId;
}

/** Accepts a run as bob and admits it (phase starting), as the admission loop does. */
async function acceptedAndAdmitted(deps: Deps, workflowId: string): Promise<string> {
  const principal = await authenticateKey(deps, 'Bearer wr_bob_key');
  const { run } = await startRun(deps, principal, { body: { workflow: workflowId, inputs: {} } });
  const admitted = await admitQueuedRuns(deps, { capacity: 10 });
  assert.ok(admitted.includes(run.id));
  return run.id;
}

/** An activity environment that keeps the SDK's activity logs (failures are asserted, not printed) quiet. */
const mockEnv = (info: { heartbeatTimeoutMs?: number } = {}) => new MockActivityEnvironment(info, { logger: silentLogger });

const run = <K extends keyof RunActivities>(env: MockActivityEnvironment, acts: RunActivities, name: K, ...args: Parameters<RunActivities[K]>) =>
  env.run(acts[name] as (...a: Parameters<RunActivities[K]>) => ReturnType<RunActivities[K]>, ...args) as ReturnType<RunActivities[K]>;

async function events(runId: string) {
  const rows = await orm.em
    .fork()
    .execute<Record<string, unknown>[]>('select type, node_id, data, sequence from run_events where run_id = ? order by sequence', [runId]);
  return rows.map((r) => ({
    type: String(r.type),
    nodeId: (r.node_id as string | null) ?? null,
    data: json<Record<string, string>>(r.data),
    sequence: Number(r.sequence),
  }));
}

async function runRow(runId: string) {
  const [r] = await orm.em
    .fork()
    .execute<Record<string, unknown>[]>('select status, billing_status, charge_usd, suspend_reason, compute_usd from runs where id = ?', [runId]);
  return {
    status: String(r!.status),
    billing_status: String(r!.billing_status),
    charge_usd: r!.charge_usd === null ? null : String(r!.charge_usd),
    compute_usd: String(r!.compute_usd),
  };
}

const text = (id: string, template: string, extra: Record<string, unknown> = {}) => ({ id, kind: 'text.template', template, ...extra }) as GraphNode;
const out = (id: string, from: string) => ({ id, kind: 'output', from }) as GraphNode;
const llm = (id: string) => ({ id, kind: 'llm.chat', provider: 'openai', model: 'gpt-4o-mini', prompt: 'Stream something' }) as GraphNode;

// ---------------------------------------------------------------------------------------------------

test('advanceRun drives a delay run in two activities (start + batch + suspend, then resume + finish), with one charge and small answers', async () => {
  const workflowId = await seed([
    text('a', 'before'),
    { id: 'wait', kind: 'delay', seconds: 1, after: ['a'] } as GraphNode,
    text('b', 'after', { after: ['wait'] }),
    out('o', 'b'),
  ]);
  const { deps, acts, ended } = harness();
  const env = mockEnv();
  const id = await acceptedAndAdmitted(deps, workflowId);

  const parked = await run(env, acts, 'advanceRun', id, []);
  assert.is(parked.kind, 'park');
  const dueAt = (parked as { until: number }).until;
  assert.ok(dueAt > Date.now() && dueAt <= Date.now() + 1_000);
  assert.equal(await run(env, acts, 'runStatus', id), {
    status: 'suspended',
    phase: null,
    reason: null,
    outcome: null,
    suspendReason: 'wait_timer',
    resumeAt: dueAt,
  });
  // Called again before the due time (a retry after a lost reply): the run stays parked, nothing is written twice.
  assert.equal(await run(env, acts, 'advanceRun', id, []), { kind: 'park', until: dueAt });

  await new Promise((r) => setTimeout(r, Math.max(0, dueAt - Date.now()) + 5));
  assert.equal(await run(env, acts, 'advanceRun', id, []), { kind: 'ended', status: 'completed', outcome: 'completed', reason: null });
  // Retried after a lost reply: nothing happens twice.
  assert.equal(await run(env, acts, 'advanceRun', id, []), { kind: 'ended', status: 'completed', outcome: 'completed', reason: null });

  const row = await runRow(id);
  assert.is(row.status, 'completed');
  assert.is(row.charge_usd, '0.250200');
  const evs = await events(id);
  assert.equal(
    evs.map((e) => e.sequence),
    evs.map((_, i) => i + 1),
    'gap-free log',
  );
  assert.equal(
    evs.filter((e) => e.type !== 'node.output.delta').map((e) => `${e.type}${e.nodeId ? `:${e.nodeId}` : ''}`),
    [
      'run.queued',
      'run.preparing',
      'run.started',
      'node.started:a',
      'node.completed:a',
      'node.started:wait',
      'run.suspended',
      'run.resumed',
      'node.completed:wait',
      'node.started:b',
      'node.completed:b',
      'node.completed:o',
      'run.completed',
    ],
  );
  assert.ok(ended.includes(id), 'onRunEnded was called for the completed run');
});

test('advanceRun names the I/O steps to run and leaves the steps given as running alone', async () => {
  const stub = await startProviderStub({ chunks: ['Hi'] });
  try {
    const workflowId = await seed([text('t', 'x'), { ...llm('l1'), after: ['t'] }, { ...llm('l2'), after: ['t'] }, out('o1', 'l1'), out('o2', 'l2')]);
    const { deps, acts } = harness({ OPENAI_BASE_URL: stub.baseURLFor('openai'), OPENAI_API_KEY: 'sk-service' });
    const env = mockEnv();
    const id = await acceptedAndAdmitted(deps, workflowId);
    // The template is computed and recorded (with the start) in this activity; the LLM steps are the workflow's.
    assert.equal(await run(env, acts, 'advanceRun', id, []), { kind: 'wait', start: ['l1', 'l2'], due: null });
    assert.equal(
      (await events(id)).filter((e) => e.type === 'node.completed').map((e) => e.nodeId),
      ['t'],
    );
    assert.equal(await run(env, acts, 'advanceRun', id, ['l1', 'l2']), { kind: 'wait', start: [], due: null });
    assert.equal(await run(env, acts, 'executeStep', { runId: id, nodeId: 'l1' }), { type: 'recorded', status: 'completed' });
    assert.equal(await run(env, acts, 'advanceRun', id, ['l2']), { kind: 'wait', start: [], due: null });
    await run(env, acts, 'executeStep', { runId: id, nodeId: 'l2' });
    assert.equal(await run(env, acts, 'advanceRun', id, []), { kind: 'ended', status: 'completed', outcome: 'completed', reason: null });
  } finally {
    await stub.close();
  }
});

test('a step activity retried after it already recorded its result returns that result without running again', async () => {
  const workflowId = await seed([text('t', 'Hello'), out('o', 't')]);
  const { deps, acts } = harness();
  const env = mockEnv();
  const id = await acceptedAndAdmitted(deps, workflowId);
  await prepareRun(deps, id);
  const first = await run(env, acts, 'executeStep', { runId: id, nodeId: 't' });
  const again = await run(env, acts, 'executeStep', { runId: id, nodeId: 't' });
  assert.equal(again, first);
  const evs = await events(id);
  assert.is(evs.filter((e) => e.type === 'node.started').length, 1);
  assert.is(evs.filter((e) => e.type === 'node.completed').length, 1);
  assert.is((await runRow(id)).compute_usd, '0.000100', 'one step charged once');
});

test('executeStep heartbeats on every published delta batch and on a timer while an LLM step streams', async () => {
  const chunks = ['Alpha ', 'beta ', 'gamma ', 'delta ', 'epsilon ', 'zeta.'];
  const stub = await startProviderStub({ chunks, delayMsBetweenChunks: 120 });
  try {
    const workflowId = await seed([llm('llm'), out('o', 'llm')]);
    const { deps, acts } = harness({ OPENAI_API_KEY: 'sk-service', OPENAI_BASE_URL: stub.baseURLFor('openai') });
    // A 300 ms heartbeat timeout: the activity beats at least every 100 ms on its own.
    const env = mockEnv({ heartbeatTimeoutMs: 300 });
    const beats: unknown[] = [];
    env.on('heartbeat', (d: unknown) => beats.push(d));
    const id = await acceptedAndAdmitted(deps, workflowId);
    await prepareRun(deps, id);
    const t0 = Date.now();
    const outcome = await run(env, acts, 'executeStep', { runId: id, nodeId: 'llm' });
    const took = Date.now() - t0;
    assert.equal(outcome, { type: 'recorded', status: 'completed' }, 'the value stays in the database');
    const progress = beats.filter((b): b is { lastSequence: number } => typeof b === 'object' && b !== null && 'lastSequence' in b);
    const deltaEvents = (await events(id)).filter((e) => e.type === 'node.output.delta');
    assert.ok(deltaEvents.length >= 2, 'the stream was published in several batches');
    assert.ok(progress.length >= deltaEvents.length - 1, `a progress heartbeat per delta batch (${progress.length} for ${deltaEvents.length})`);
    const seqs = progress.map((p) => p.lastSequence);
    assert.equal(
      seqs,
      [...seqs].sort((a, b) => a - b),
      'progress only moves forward',
    );
    const timerBeats = beats.length - progress.length;
    assert.ok(timerBeats >= Math.floor(took / 100) - 2, `timer heartbeats while streaming (${timerBeats} in ${took} ms)`);
  } finally {
    await stub.close();
  }
});

test('a quick I/O step sends no heartbeat, and with `advance` its activity records it and completes the run', async () => {
  const page = createServer((_req, res) => res.end('hello'));
  await new Promise<void>((resolve) => page.listen(0, '127.0.0.1', resolve));
  try {
    const url = `http://127.0.0.1:${(page.address() as AddressInfo).port}/`;
    const workflowId = await seed([{ id: 'fetch', kind: 'http.request', method: 'GET', url } as GraphNode, out('o', 'fetch')]);
    const { deps, acts } = harness({ ALLOW_PRIVATE_NETWORK: '1' });
    const env = mockEnv({ heartbeatTimeoutMs: 30_000 });
    const beats: unknown[] = [];
    env.on('heartbeat', (d: unknown) => beats.push(d));
    const id = await acceptedAndAdmitted(deps, workflowId);
    assert.equal(await run(env, acts, 'advanceRun', id, []), { kind: 'wait', start: ['fetch'], due: null });
    const report = await run(env, acts, 'executeStep', { runId: id, nodeId: 'fetch', advance: true });
    assert.equal(report, { type: 'recorded', status: 'completed', next: { kind: 'ended', status: 'completed', outcome: 'completed', reason: null } });
    assert.equal(beats, [], 'no heartbeat: nothing to report before the step ended');
    assert.is((await runRow(id)).status, 'completed');
  } finally {
    await new Promise((resolve) => page.close(resolve));
  }
});

test('cancelling the activity aborts the streaming step: the call rejects, the stream stops, nothing is recorded', async () => {
  const chunks = Array.from({ length: 20 }, (_, i) => `chunk${i} `);
  const stub = await startProviderStub({ chunks, delayMsBetweenChunks: 100 });
  try {
    const workflowId = await seed([llm('llm'), out('o', 'llm')]);
    const { deps, acts } = harness({ OPENAI_API_KEY: 'sk-service', OPENAI_BASE_URL: stub.baseURLFor('openai') });
    const env = mockEnv({ heartbeatTimeoutMs: 3_000 });
    const id = await acceptedAndAdmitted(deps, workflowId);
    await prepareRun(deps, id);
    const pending = run(env, acts, 'executeStep', { runId: id, nodeId: 'llm' }).then(
      (v) => ({ ok: true as const, v }),
      (err: unknown) => ({ ok: false as const, err }),
    );
    // Wait until the stream has published something, then cancel (what a cancelled workflow does).
    for (let i = 0; i < 100 && !(await events(id)).some((e) => e.type === 'node.output.delta'); i++) await new Promise((r) => setTimeout(r, 20));
    const t0 = Date.now();
    env.cancel();
    const result = await pending;
    assert.is(result.ok, false, 'the activity rejects when cancelled');
    assert.ok(Date.now() - t0 < 1_000, 'promptly, not after the stream ended');
    await new Promise((r) => setTimeout(r, 400));
    const evs = await events(id);
    assert.not.ok(
      evs.some((e) => e.type === 'node.completed' || e.type === 'node.failed'),
      'no result recorded',
    );
    const streamed = evs
      .filter((e) => e.type === 'node.output.delta')
      .map((e) => e.data.text)
      .join('');
    assert.ok(streamed.length < chunks.join('').length, 'the stream was cut');
    assert.is((await runRow(id)).status, 'running', "the run itself is the cancel-run service's business");
  } finally {
    await stub.close();
  }
});

test('a BYOK step without a key suspends the run (wait_signal) and the activity says so', async () => {
  const workflowId = await seed([llm('llm'), out('o', 'llm')], { credentialMode: 'byok' });
  const { deps, acts } = harness();
  const env = mockEnv();
  const id = await acceptedAndAdmitted(deps, workflowId);
  await prepareRun(deps, id);
  assert.equal(await run(env, acts, 'executeStep', { runId: id, nodeId: 'llm' }), { type: 'suspended', reason: 'wait_signal' });
  assert.equal(await run(env, acts, 'runStatus', id), {
    status: 'suspended',
    phase: null,
    reason: null,
    outcome: null,
    suspendReason: 'wait_signal',
    resumeAt: null,
  });
});

test('the cancelRun activity (a Temporal cancellation) commits cancelled, not charged, exactly once', async () => {
  const workflowId = await seed([text('t', 'x'), out('o', 't')]);
  const { deps, acts, ended } = harness();
  const env = mockEnv();
  const id = await acceptedAndAdmitted(deps, workflowId);
  await prepareRun(deps, id);
  assert.equal(await run(env, acts, 'cancelRun', id), { cancelled: true, status: 'cancelled', reason: null });
  // Again (the API cancelled first, or a retry): nothing more, and the run's status for the workflow's close.
  assert.equal(await run(env, acts, 'cancelRun', id), { cancelled: false, status: 'cancelled', reason: null, outcome: null });
  const row = await runRow(id);
  assert.is(row.status, 'cancelled');
  assert.is(row.billing_status, 'not_charged');
  assert.is((await events(id)).filter((e) => e.type === 'run.cancelled').length, 1);
  assert.ok(ended.includes(id));
  // A step after the cancellation does not run.
  assert.equal(await run(env, acts, 'executeStep', { runId: id, nodeId: 't' }), { type: 'not_runnable', status: 'cancelled' });
  assert.equal(await run(env, acts, 'cancelRun', randomUUID()), { cancelled: false, status: null, reason: null, outcome: null });
});

test.run();
