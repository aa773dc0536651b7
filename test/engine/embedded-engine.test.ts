import { randomBytes, randomUUID } from 'node:crypto';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { parseCatalog } from '../../src/catalog/parse-catalog.ts';
import { loadCatalog } from '../../src/catalog/load-catalog.ts';
import { loadConfig } from '../../src/config/config.ts';
import type { Orm } from '../../src/db/orm.ts';
import { json } from '../../src/db/sql.ts';
import type { GraphNode } from '../../src/domain/graph/types.ts';
import { EmbeddedEngine, type EmbeddedEngineOptions } from '../../src/engine/embedded/embedded-engine.ts';
import type { FreeAction } from '../../src/domain/graph/interpreter.ts';
import { chunkText } from '../../src/domain/run-steps.ts';
import { executeStep } from '../../src/engine/execute-step.ts';
import { admitQueuedRuns, admitQueuedRunsDetailed } from '../../src/runs/admit-runs.ts';
import { completeRun } from '../../src/runs/complete-run.ts';
import { applyActions } from '../../src/runs/free-actions.ts';
import { prepareRun, startAdmitted } from '../../src/runs/prepare-run.ts';
import { loadRunState } from '../../src/runs/run-state.ts';
import { plan } from '../../src/domain/graph/interpreter.ts';
import { analyseGraph } from '../../src/domain/graph/analysis.ts';
import { Sealer } from '../../src/security/crypto.ts';
import { authenticateKey } from '../../src/services/auth/authenticate-key.ts';
import type { Deps } from '../../src/runs/deps.ts';
import { InProcessRunEventBus } from '../../src/services/events/bus.ts';
import { cancelRun } from '../../src/runs/cancel-run.ts';
import { startRun } from '../../src/runs/start-run.ts';
import { supplyRunCredentials } from '../../src/runs/supply-run-credentials.ts';
import { resetDb, testOrm } from '../helpers/db.ts';
import { startProviderStub, STUB_INPUT_TOKENS, STUB_OUTPUT_TOKENS } from '../helpers/provider-stub.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { statementsWhile, type LoggedStatement } from '../helpers/statement-log.ts';
import { ADMIT_QUEUED } from '../../src/sql/admit-queued.ts';
import { ACCEPT_RUNS } from '../../src/sql/accept-runs.ts';
import { QUICK_EMBEDDED } from '../helpers/engine-fixtures.ts';

// ---------------------------------------------------------------------------------------------------
// Harness: a real database, real services, the real engine.

const orm: Orm = await testOrm();
const sealer = new Sealer(randomBytes(32));
const engines: EmbeddedEngine[] = [];

interface Harness {
  deps: Deps;
  engine: EmbeddedEngine;
}

function harness(env: Record<string, string> = {}, opts: EmbeddedEngineOptions = {}): Harness {
  const config = loadConfig({ CATALOG_FILE: 'none', LOG_LEVEL: 'silent', ...env });
  const base = {
    config,
    orm,
    log: pino({ level: 'silent' }),
    sealer,
    bus: new InProcessRunEventBus(),
    baseUrl: () => 'http://localhost:8080/v1',
  };
  const engine = new EmbeddedEngine(base, { ...QUICK_EMBEDDED, ...opts });
  engines.push(engine);
  return { deps: { ...base, engine }, engine };
}

const STEP = '0.000100';
const PRICE = '0.250000';

interface Fixture {
  workflowId: string;
  versionId: string;
}

/** Accounts alice (creator) and bob (buyer, wallet caller), one workflow by alice with `nodes`. */
async function seed(
  nodes: GraphNode[],
  o: {
    bobWallet?: string;
    priceUsd?: string;
    computeLimitUsd?: string;
    credentialMode?: 'service_hosted' | 'byok';
    bundle?: { runs: number; usdPerRun: string };
    bobMax?: number;
    bobProviderKeys?: Record<string, string>;
  } = {},
): Promise<Fixture> {
  await resetDb(orm);
  const workflowId = randomUUID();
  const versionId = randomUUID();
  const catalog = {
    pricing: { stepUsd: STEP, models: { 'gpt-4o-mini': { input: '0.15', output: '0.60' } } },
    accounts: [
      { handle: 'alice', walletUsd: '10.000000', apiKeys: [{ secret: 'wr_alice_key', scopes: ['run:execute', 'run:read'] }] },
      {
        handle: 'bob',
        walletUsd: o.bobWallet ?? '10.000000',
        maxConcurrentRuns: o.bobMax ?? null,
        providerKeys: o.bobProviderKeys ?? {},
        apiKeys: [{ secret: 'wr_bob_key', scopes: ['run:execute', 'run:read'], rateLimitPerMinute: 1000 }],
      },
    ],
    workflows: [
      {
        id: workflowId,
        owner: 'alice',
        name: 'Engine test',
        runModel: 'per_run',
        priceUsd: o.priceUsd ?? PRICE,
        credentialMode: o.credentialMode ?? 'service_hosted',
        computeLimitUsd: o.computeLimitUsd ?? null,
        versions: [{ id: versionId, label: 'v1', graph: { nodes } }],
      },
    ],
    bundles: o.bundle ? [{ account: 'bob', workflow: workflowId, version: 'v1', runs: o.bundle.runs, usdPerRun: o.bundle.usdPerRun }] : [],
  };
  await loadCatalog(orm, parseCatalog(JSON.stringify(catalog), 'test'), { sealer });
  return { workflowId, versionId };
}

async function start(h: Harness, f: Fixture, inputs: Record<string, unknown> = {}, who: 'bob' | 'alice' = 'bob'): Promise<string> {
  const principal = await authenticateKey(h.deps, `Bearer wr_${who}_key`);
  const { run } = await startRun(h.deps, principal, { body: { workflow: f.workflowId, inputs } });
  return run.id;
}

const db = () => orm.em.fork();

interface RunRow {
  status: string;
  phase: string | null;
  reason: string | null;
  outcome: string | null;
  billing_status: string;
  charge_usd: string | null;
  suspend_reason: string | null;
  outputs: { nodeId: string; name: string; value: unknown }[];
  compute_usd: string;
  steps_executed: number;
  started_at: unknown;
  completed_at: unknown;
  lease_owner: string | null;
}

async function runRow(id: string): Promise<RunRow> {
  const [r] = await db().execute<Record<string, unknown>[]>('select * from runs where id = ?', [id]);
  return { ...(r as unknown as RunRow), outputs: json(r!.outputs), charge_usd: r!.charge_usd === null ? null : String(r!.charge_usd) };
}

interface Ev {
  type: string;
  sequence: number;
  nodeId: string | null;
  data: Record<string, string>;
}

async function events(id: string): Promise<Ev[]> {
  const rows = await db().execute<Record<string, unknown>[]>('select type, sequence, node_id, data from run_events where run_id = ? order by sequence', [id]);
  return rows.map((r) => ({ type: String(r.type), sequence: Number(r.sequence), nodeId: (r.node_id as string | null) ?? null, data: json(r.data) }));
}

const TERMINAL = ['completed', 'failed', 'cancelled'];
const waitTerminal = (id: string, timeoutMs = 10_000) =>
  waitFor(
    `run ${id} to end`,
    async () => {
      const r = await runRow(id);
      return TERMINAL.includes(r.status) ? r : null;
    },
    timeoutMs,
  );
const waitStatus = (id: string, status: string, timeoutMs = 10_000) =>
  waitFor(
    `run ${id} to be ${status}`,
    async () => {
      const r = await runRow(id);
      return r.status === status ? r : null;
    },
    timeoutMs,
  );
const waitEvent = (id: string, type: string, nodeId: string | null = null, timeoutMs = 10_000) =>
  waitFor(`${type} on run ${id}`, async () => (await events(id)).find((e) => e.type === type && (nodeId === null || e.nodeId === nodeId)), timeoutMs);

async function wallet(handle: string): Promise<{ balance: string; held: string }> {
  const [w] = await db().execute<{ balance_usd: string; held_usd: string }[]>(
    'select w.balance_usd, w.held_usd from wallets w join accounts a on a.id = w.account_id where a.handle = ?',
    [handle],
  );
  return { balance: String(w!.balance_usd), held: String(w!.held_usd) };
}

async function ledger(runId: string): Promise<{ kind: string; amount: string }[]> {
  const rows = await db().execute<{ kind: string; amount_usd: string }[]>('select kind, amount_usd from ledger_entries where run_id = ? order by id', [runId]);
  return rows.map((r) => ({ kind: r.kind, amount: String(r.amount_usd) }));
}

/** Sequences 1..n without gaps, every node.completed / node.started at most once per node. */
function assertLogSound(evs: Ev[]): void {
  assert.equal(
    evs.map((e) => e.sequence),
    evs.map((_, i) => i + 1),
    'sequences are 1..n without gaps',
  );
  for (const type of ['node.started', 'node.completed', 'node.failed', 'node.skipped']) {
    const ids = evs.filter((e) => e.type === type).map((e) => e.nodeId);
    assert.equal(ids.length, new Set(ids).size, `each ${type} at most once per node`);
  }
  const terminal = evs.filter((e) => ['run.completed', 'run.failed', 'run.cancelled'].includes(e.type));
  assert.ok(terminal.length <= 1, 'at most one terminal event');
  if (terminal.length) assert.is(evs.at(-1), terminal[0], 'the terminal event is the last one');
}

function deltaText(evs: Ev[], nodeId: string): string {
  return evs
    .filter((e) => e.type === 'node.output.delta' && e.nodeId === nodeId)
    .map((e) => e.data.text)
    .join('');
}

const text = (id: string, template: string, extra: Record<string, unknown> = {}) => ({ id, kind: 'text.template', template, ...extra }) as GraphNode;
const out = (id: string, from: string, extra: Record<string, unknown> = {}) => ({ id, kind: 'output', from, ...extra }) as GraphNode;
const delay = (id: string, seconds: number, extra: Record<string, unknown> = {}) => ({ id, kind: 'delay', seconds, ...extra }) as GraphNode;

const LONG = 'The quick brown fox jumps over the lazy dog while the engine streams this sentence in several pieces.';
const threeSteps: GraphNode[] = [
  { id: 'name', kind: 'input.text', required: true } as GraphNode,
  text('t1', 'Hello {{name}}.'),
  text('t2', '{{t1}} {{t1}}'),
  text('t3', `{{t2}} ${LONG}`),
  out('result', 't3', { name: 'Result', type: 'text' }),
];

async function withEngine(h: Harness, fn: () => Promise<void>): Promise<void> {
  await h.engine.start();
  try {
    await fn();
  } finally {
    await h.engine.stop();
  }
}

test.after.each(async () => {
  for (const e of engines.splice(0)) await e.stop().catch(() => undefined);
});

// ---------------------------------------------------------------------------------------------------

test('chunkText splits text into a few pieces whose concatenation is the text', () => {
  const long = LONG.repeat(20);
  const chunks = chunkText(long);
  assert.ok(chunks.length > 1 && chunks.length <= 32);
  assert.is(chunks.join(''), long);
  assert.equal(chunkText(''), []);
  assert.equal(chunkText('short'), ['short']);
  const emoji = '😀'.repeat(100);
  assert.ok(
    chunkText(emoji).every((c) => !/[\ud800-\udbff]$/.test(c)),
    'no chunk ends inside a surrogate pair',
  );
});

test('a 3-step template run goes queued → preparing → started → nodes → completed with exact events and money', async () => {
  const f = await seed(threeSteps);
  const h = harness();
  await withEngine(h, async () => {
    const before = await wallet('bob');
    const id = await start(h, f, { name: 'Ada' });
    const run = await waitTerminal(id);
    assert.is(run.status, 'completed');
    assert.is(run.outcome, 'completed');
    const t1 = 'Hello Ada.';
    const t3 = `${t1} ${t1} ${LONG}`;
    assert.equal(run.outputs, [{ nodeId: 'result', name: 'Result', type: 'text', value: t3 }]);

    const evs = await events(id);
    assertLogSound(evs);
    const shape = evs.filter((e) => e.type !== 'node.output.delta').map((e) => `${e.type}${e.nodeId ? `:${e.nodeId}` : ''}`);
    assert.equal(shape, [
      'run.queued',
      'run.preparing',
      'run.started',
      'node.started:t1',
      'node.completed:t1',
      'node.started:t2',
      'node.completed:t2',
      'node.started:t3',
      'node.completed:t3',
      'node.completed:result',
      'run.completed',
    ]);
    assert.equal(evs[0]!.data, { status: 'pending' });
    assert.equal(evs[1]!.data, { status: 'pending' });
    assert.equal(evs[2]!.data, { status: 'running' });
    assert.equal(evs.at(-1)!.data, { status: 'completed' });
    assert.is(deltaText(evs, 't1'), t1);
    assert.is(deltaText(evs, 't3'), t3);
    assert.ok(evs.filter((e) => e.nodeId === 't3' && e.type === 'node.output.delta').length > 1, 't3 streams in several chunks');
    // Deltas sit between their node's started and completed events.
    const t3Deltas = evs.filter((e) => e.nodeId === 't3' && e.type === 'node.output.delta').map((e) => e.sequence);
    const t3Start = evs.find((e) => e.nodeId === 't3' && e.type === 'node.started')!.sequence;
    const t3Done = evs.find((e) => e.nodeId === 't3' && e.type === 'node.completed')!.sequence;
    assert.ok(t3Deltas.every((s) => s > t3Start && s < t3Done));

    // Money: creator price + 3 steps, held, released, charged; the wallet moved by exactly the charge.
    assert.is(run.charge_usd, '0.250300');
    assert.is(run.billing_status, 'settled');
    assert.is(String(run.compute_usd), '0.000300');
    assert.is(Number(run.steps_executed), 3);
    assert.equal(await ledger(id), [
      { kind: 'hold', amount: '-0.250300' },
      { kind: 'release', amount: '0.250300' },
      { kind: 'charge', amount: '-0.250300' },
    ]);
    const after = await wallet('bob');
    assert.is(after.balance, '9.749700');
    assert.is(before.balance, '10.000000');
    assert.is(after.held, '0.000000');
    assert.is(run.lease_owner, null, 'the lease is released at the end');
  });
});

/** Statements the ORM sends while `fn` runs that have `needle` among their parameters, the run's acceptance left out. */
async function statementsMentioning(needle: () => string | null, fn: () => Promise<void>): Promise<string[]> {
  const mentions = (s: LoggedStatement) => {
    const n = needle();
    // A statement over arrays mentions the run in one of them, one over named calls in its JSON.
    const mentioned = (s.params ?? []).some((p) => p === n || (Array.isArray(p) && p.includes(n)) || (typeof p === 'string' && !!n && p.includes(n)));
    return !!n && s.query !== ACCEPT_RUNS.text && mentioned;
  };
  return (await statementsWhile(orm, fn, mentions)).sql;
}

test('a run of template steps only is started, recorded, funded and finished by one write of its row, with one event write for all its events', async () => {
  const f = await seed(threeSteps);
  const h = harness();
  await withEngine(h, async () => {
    let id: string | null = null;
    const published: number[] = [];
    const writes = await statementsMentioning(
      () => id,
      async () => {
        id = await start(h, f, { name: 'Ada' });
        h.deps.bus.subscribe(id, (last) => published.push(last));
        await waitTerminal(id);
      },
    );
    const eventWrites = writes.filter((q) => /insert into run_event_batches/i.test(q));
    // run.preparing, run.started, the three steps, the output node and run.completed in one statement.
    assert.is(eventWrites.length, 1, eventWrites.map((q) => q.slice(0, 80)).join('\n'));
    // Started, funded and made terminal by that same statement: the run's row is written once after acceptance.
    const runWrites = writes.filter((q) => /update runs/i.test(q));
    assert.is(runWrites.length, 1, runWrites.map((q) => q.slice(0, 80)).join('\n'));
    const evs = await events(id!);
    assertLogSound(evs);
    // Nothing is published before its commit, and the one commit after acceptance holds the whole run.
    assert.equal(published, [evs.at(-1)!.sequence], 'live readers are told once, when the run has ended');
    assert.equal(await ledger(id!), [
      { kind: 'hold', amount: '-0.250300' },
      { kind: 'release', amount: '0.250300' },
      { kind: 'charge', amount: '-0.250300' },
    ]);
    assert.is(Number((await runRow(id!)).steps_executed), 3);
  });
});

test('template steps before a delay are committed before the run suspends, and the rest after it resumes', async () => {
  const f = await seed([
    { id: 'name', kind: 'input.text', required: true } as GraphNode,
    text('a', 'A {{name}}'),
    text('b', '{{a}} B'),
    delay('d', 0.3, { after: ['b'] }),
    text('c', '{{b}} C', { after: ['d'] }),
    out('o', 'c', { name: 'O', type: 'text' }),
  ]);
  const h = harness();
  await withEngine(h, async () => {
    const id = await start(h, f, { name: 'x' });
    await waitStatus(id, 'suspended');
    const during = await events(id);
    assert.ok(
      during.some((e) => e.type === 'node.completed' && e.nodeId === 'b'),
      'b is recorded before the suspension',
    );
    const run = await waitTerminal(id);
    assert.is(run.status, 'completed');
    assert.equal(run.outputs, [{ nodeId: 'o', name: 'O', type: 'text', value: 'A x B C' }]);
    const evs = await events(id);
    assertLogSound(evs);
    const seq = (type: string, nodeId: string | null = null) => evs.find((e) => e.type === type && e.nodeId === nodeId)!.sequence;
    assert.ok(seq('node.completed', 'b') < seq('run.suspended') && seq('run.resumed') < seq('node.started', 'c'));
    assert.is(run.compute_usd, '0.000300');
  });
});

test('a false condition skips its branch with condition_false and the run still completes', async () => {
  const f = await seed([
    { id: 'answer', kind: 'input.text' } as GraphNode,
    { id: 'yes', kind: 'condition', value: '{{answer}}', op: 'equals', operand: 'yes' } as GraphNode,
    text('on_yes', 'You said yes', { when: { node: 'yes', is: true } }),
    text('on_no', 'You said no', { when: { node: 'yes', is: false } }),
    out('out_yes', 'on_yes'),
    out('out_no', 'on_no'),
  ]);
  const h = harness();
  await withEngine(h, async () => {
    const id = await start(h, f, { answer: 'no' }, 'alice');
    const run = await waitTerminal(id);
    assert.is(run.status, 'completed');
    assert.is(run.outcome, 'completed');
    assert.equal(
      run.outputs.map((o) => [o.nodeId, o.value]),
      [['out_no', 'You said no']],
    );
    const evs = await events(id);
    assertLogSound(evs);
    const skipped = evs.filter((e) => e.type === 'node.skipped').map((e) => [e.nodeId, e.data.reason]);
    assert.equal(skipped, [
      ['on_yes', 'condition_false'],
      ['out_yes', 'condition_false'],
    ]);
    assert.ok(
      evs.some((e) => e.type === 'node.completed' && e.nodeId === 'yes'),
      'the condition reports completion',
    );
    assert.not.ok(evs.some((e) => e.type === 'node.started' && e.nodeId === 'on_yes'));
    // The owner pays compute only: one executed step.
    assert.is(run.charge_usd, '0.000100');
  });
});

test('a failing json.parse gives completed_with_issues charged for the completed steps only', async () => {
  const f = await seed([
    text('raw', 'not json'),
    { id: 'parsed', kind: 'json.parse', from: 'raw' } as GraphNode,
    text('other', 'fine'),
    out('out_parsed', 'parsed'),
    out('out_other', 'other'),
  ]);
  const h = harness();
  await withEngine(h, async () => {
    const id = await start(h, f);
    const run = await waitTerminal(id);
    assert.is(run.status, 'completed');
    assert.is(run.outcome, 'completed_with_issues');
    assert.equal(
      run.outputs.map((o) => o.nodeId),
      ['out_other'],
    );
    const evs = await events(id);
    assertLogSound(evs);
    const failed = evs.find((e) => e.type === 'node.failed')!;
    assert.is(failed.nodeId, 'parsed');
    assert.is(failed.data.reason, 'invalid JSON in parsed');
    assert.equal(evs.find((e) => e.type === 'node.skipped' && e.nodeId === 'out_parsed')?.data, { reason: 'upstream_failed' });
    // Two completed steps, no creator price although bob is a wallet caller.
    assert.is(run.charge_usd, '0.000200');
    assert.is((await wallet('bob')).balance, '9.999800');
  });
});

test('a run whose only output fails is failed with the node reason, charged the compute used', async () => {
  const f = await seed([text('raw', '{"a": '), { id: 'parsed', kind: 'json.parse', from: 'raw' } as GraphNode, out('o', 'parsed.a')]);
  const h = harness();
  await withEngine(h, async () => {
    const id = await start(h, f);
    const run = await waitTerminal(id);
    assert.is(run.status, 'failed');
    assert.is(run.reason, 'invalid JSON in parsed');
    assert.is(run.outcome, null);
    assert.is(run.charge_usd, '0.000100');
    assert.is(run.billing_status, 'settled');
    const evs = await events(id);
    assertLogSound(evs);
    assert.equal(evs.at(-1)!.data, { status: 'failed', reason: 'invalid JSON in parsed' });
  });
});

test('json.parse reads paths and parses valid JSON into the output value', async () => {
  const f = await seed([
    text('raw', '{"items": [{"n": 1}, {"n": 2}]}'),
    { id: 'parsed', kind: 'json.parse', from: 'raw' } as GraphNode,
    out('o', 'parsed.items.1'),
  ]);
  const h = harness();
  await withEngine(h, async () => {
    const id = await start(h, f, {}, 'alice');
    const run = await waitTerminal(id);
    assert.is(run.status, 'completed');
    assert.equal(run.outputs[0]!.value, { n: 2 });
  });
});

test('a delay suspends the run with wait_timer and it resumes by itself', async () => {
  const f = await seed([text('a', 'before'), delay('wait', 1, { after: ['a'] }), text('b', 'after', { after: ['wait'] }), out('o', 'b')]);
  const h = harness();
  await withEngine(h, async () => {
    const t0 = Date.now();
    const id = await start(h, f, {}, 'alice');
    const suspended = await waitStatus(id, 'suspended');
    assert.is(suspended.suspend_reason, 'wait_timer');
    // The driver releases the lease right after the suspension commits, when it parks.
    const parked = await waitFor(`run ${id} parked`, async () => {
      const r = await runRow(id);
      return r.status !== 'suspended' || r.lease_owner === null ? r : null;
    });
    assert.is(parked.status, 'suspended', 'still suspended: the delay has not passed yet');
    assert.is(parked.lease_owner, null, 'a suspended run holds no lease');
    const run = await waitTerminal(id);
    assert.ok(Date.now() - t0 >= 1_000, 'the delay lasted at least its seconds');
    assert.is(run.status, 'completed');
    const evs = await events(id);
    assertLogSound(evs);
    const shape = evs.map((e) => `${e.type}${e.nodeId ? `:${e.nodeId}` : ''}`).filter((s) => !s.startsWith('node.output.delta'));
    assert.equal(shape.slice(3), [
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
    ]);
    assert.equal(evs.find((e) => e.type === 'run.suspended')!.data, { status: 'suspended', reason: 'wait_timer' });
    assert.equal(evs.find((e) => e.type === 'run.resumed')!.data, { status: 'running' });
    assert.is(run.charge_usd, '0.000200');
  });
});

test('parallel branches run concurrently and a timer fires while another branch works', async () => {
  const f = await seed([
    text('a', 'A'),
    delay('d', 0.3),
    text('b', 'B after delay', { after: ['d'] }),
    text('c', '{{a}} and C'),
    out('o1', 'b'),
    out('o2', 'c'),
  ]);
  const h = harness();
  await withEngine(h, async () => {
    const id = await start(h, f, {}, 'alice');
    const run = await waitTerminal(id);
    assert.is(run.status, 'completed');
    assert.equal(
      run.outputs.map((o) => o.value),
      ['B after delay', 'A and C'],
    );
    assertLogSound(await events(id));
    assert.is(run.charge_usd, '0.000300');
  });
});

test('RUN_CAPACITY=1 keeps a second run pending in the queue until the first ends', async () => {
  const f = await seed([delay('d', 1), text('t', 'done', { after: ['d'] }), out('o', 't')]);
  const h = harness({ RUN_CAPACITY: '1' });
  await withEngine(h, async () => {
    const first = await start(h, f, {}, 'alice');
    await waitStatus(first, 'suspended');
    const second = await start(h, f, {}, 'alice');
    await new Promise((r) => setTimeout(r, 400));
    const waiting = await runRow(second);
    assert.is(waiting.status, 'pending');
    assert.is(waiting.phase, 'queued');
    assert.equal(
      (await events(second)).map((e) => e.type),
      ['run.queued'],
    );
    const a = await waitTerminal(first);
    const b = await waitTerminal(second);
    assert.is(a.status, 'completed');
    assert.is(b.status, 'completed');
    assert.ok(new Date(String(b.started_at)).getTime() >= new Date(String(a.completed_at)).getTime(), 'the second started after the first ended');
  });
});

test('with RUN_CAPACITY=1 and no sweep to fall back on, runs accepted together are each admitted as the one before ends', async () => {
  const f = await seed([text('t', 'x'), out('o', 't')]);
  // The sweep would admit what admission rounds left behind; here it never runs during the test.
  const h = harness({ RUN_CAPACITY: '1' }, { sweepIntervalMs: 600_000 });
  await withEngine(h, async () => {
    const ids = await Promise.all(Array.from({ length: 12 }, () => start(h, f, {}, 'alice')));
    for (const id of ids) assert.is((await waitTerminal(id, 5_000)).status, 'completed');
    const rows = await Promise.all(ids.map(runRow));
    const spans = rows.map((r) => [new Date(String(r.started_at)).getTime(), new Date(String(r.completed_at)).getTime()] as const).sort((a, b) => a[0] - b[0]);
    for (let i = 1; i < spans.length; i++) assert.ok(spans[i]![0] >= spans[i - 1]![1], 'one at a time');
  });
});

test('a per-account max_concurrent_runs queues that account only', async () => {
  const f = await seed([delay('d', 0.6), text('t', 'x', { after: ['d'] }), out('o', 't')], { bobMax: 1, priceUsd: '0' });
  const h = harness({ RUN_CAPACITY: '8' });
  await withEngine(h, async () => {
    const b1 = await start(h, f);
    await waitStatus(b1, 'suspended');
    const b2 = await start(h, f);
    const a1 = await start(h, f, {}, 'alice');
    await waitStatus(a1, 'suspended');
    assert.is((await runRow(b2)).phase, 'queued', "bob's second run waits for bob's first");
    await waitTerminal(b1);
    assert.is((await waitTerminal(b2)).status, 'completed');
    assert.is((await waitTerminal(a1)).status, 'completed');
  });
});

test('a run waiting past QUEUE_MAX_WAIT_SECONDS fails, not charged', async () => {
  const f = await seed([delay('d', 3), out('o', 'd')]);
  const h = harness({ RUN_CAPACITY: '1', QUEUE_MAX_WAIT_SECONDS: '1' });
  await withEngine(h, async () => {
    const first = await start(h, f, {}, 'alice');
    await waitStatus(first, 'suspended');
    const before = await wallet('bob');
    const second = await start(h, f);
    const run = await waitTerminal(second, 5_000);
    assert.is(run.status, 'failed');
    assert.is(run.reason, 'the run waited too long for capacity');
    assert.is(run.billing_status, 'not_charged');
    assert.is(run.charge_usd, null);
    assert.equal(await wallet('bob'), before);
    assert.equal(
      (await events(second)).map((e) => e.type),
      ['run.queued', 'run.failed'],
    );
    await cancelRun(h.deps, null, first);
  });
});

test('insufficient funds fails the run during preparation, not charged, wallet untouched', async () => {
  const f = await seed(threeSteps, { bobWallet: '0.100000' });
  const h = harness();
  await withEngine(h, async () => {
    const id = await start(h, f, { name: 'x' });
    const run = await waitTerminal(id);
    assert.is(run.status, 'failed');
    assert.match(run.reason!, /^insufficient funds/);
    assert.is(run.billing_status, 'not_charged');
    assert.is(run.charge_usd, null);
    assert.equal(await wallet('bob'), { balance: '0.100000', held: '0.000000' });
    assert.equal(await ledger(id), []);
    const evs = await events(id);
    assert.equal(
      evs.map((e) => e.type),
      ['run.queued', 'run.preparing', 'run.failed'],
    );
    assertLogSound(evs);
  });
});

test('a bundle pays the run: one bundle run consumed, usdPerRun charged, wallet untouched', async () => {
  const f = await seed(threeSteps, { bundle: { runs: 2, usdPerRun: '0.200000' } });
  const h = harness();
  await withEngine(h, async () => {
    const id = await start(h, f, { name: 'x' });
    const run = await waitTerminal(id);
    assert.is(run.status, 'completed');
    assert.is(run.charge_usd, '0.200000');
    assert.is(run.billing_status, 'settled');
    assert.equal(await wallet('bob'), { balance: '10.000000', held: '0.000000' });
    assert.equal(await ledger(id), []);
    const [b] = await db().execute<{ runs_left: number }[]>('select runs_left from bundles');
    assert.is(Number(b!.runs_left), 1);
  });
});

test('the compute limit stops the run before the step that would cross it, charged the compute used', async () => {
  const f = await seed(threeSteps, { computeLimitUsd: '0.000200' });
  const h = harness();
  await withEngine(h, async () => {
    const id = await start(h, f, { name: 'x' });
    const run = await waitTerminal(id);
    assert.is(run.status, 'failed');
    assert.is(run.reason, 'compute limit reached');
    assert.is(run.charge_usd, '0.000200');
    assert.is(run.billing_status, 'settled');
    const evs = await events(id);
    assertLogSound(evs);
    assert.ok(evs.some((e) => e.type === 'node.completed' && e.nodeId === 't2'));
    assert.not.ok(
      evs.some((e) => e.nodeId === 't3'),
      'the blocked step never started',
    );
    assert.equal(await ledger(id), [
      { kind: 'hold', amount: '-0.250300' },
      { kind: 'release', amount: '0.250300' },
      { kind: 'charge', amount: '-0.000200' },
    ]);
    assert.is((await wallet('bob')).balance, '9.999800');
  });
});

test('cancel during a delay: cancelled, not charged, hold released, the late timer changes nothing', async () => {
  const f = await seed([text('a', 'x'), delay('d', 1, { after: ['a'] }), text('b', 'y', { after: ['d'] }), out('o', 'b')]);
  const h = harness();
  await withEngine(h, async () => {
    const id = await start(h, f);
    await waitStatus(id, 'suspended');
    assert.is((await wallet('bob')).held, '0.250200');
    const res = await cancelRun(h.deps, null, id);
    assert.equal(res, { id, status: 'cancelled', cancelRequested: true });
    await new Promise((r) => setTimeout(r, 1_400));
    const run = await runRow(id);
    assert.is(run.status, 'cancelled');
    assert.is(run.billing_status, 'not_charged');
    assert.is(run.charge_usd, null);
    assert.equal(await wallet('bob'), { balance: '10.000000', held: '0.000000' });
    assert.equal(await ledger(id), [
      { kind: 'hold', amount: '-0.250200' },
      { kind: 'release', amount: '0.250200' },
    ]);
    const evs = await events(id);
    assertLogSound(evs);
    assert.is(evs.at(-1)!.type, 'run.cancelled');
    assert.not.ok(evs.some((e) => e.nodeId === 'b'));
  });
});

test('cancel while queued: cancelled, never prepared, not charged', async () => {
  const f = await seed([delay('d', 0.8), out('o', 'd')]);
  const h = harness({ RUN_CAPACITY: '1' });
  await withEngine(h, async () => {
    const first = await start(h, f, {}, 'alice');
    await waitStatus(first, 'suspended');
    const second = await start(h, f);
    assert.is((await runRow(second)).phase, 'queued');
    await cancelRun(h.deps, null, second);
    await waitTerminal(first);
    await new Promise((r) => setTimeout(r, 300));
    const run = await runRow(second);
    assert.is(run.status, 'cancelled');
    assert.is(run.billing_status, 'not_charged');
    assert.equal(
      (await events(second)).map((e) => e.type),
      ['run.queued', 'run.cancelled'],
    );
    assert.equal(await wallet('bob'), { balance: '10.000000', held: '0.000000' });
  });
});

test('concurrent runs against a wallet that covers exactly one: exactly one is funded', async () => {
  const f = await seed(threeSteps, { bobWallet: '0.250300' });
  const h = harness();
  await withEngine(h, async () => {
    const ids = await Promise.all([1, 2, 3, 4].map(() => start(h, f, { name: 'x' })));
    const runs = await Promise.all(ids.map((id) => waitTerminal(id)));
    const completed = runs.filter((r) => r.status === 'completed');
    const failed = runs.filter((r) => r.status === 'failed');
    assert.is(completed.length, 1);
    assert.is(failed.length, 3);
    for (const r of failed) {
      assert.match(r.reason!, /^insufficient funds/);
      assert.is(r.billing_status, 'not_charged');
    }
    assert.equal(await wallet('bob'), { balance: '0.000000', held: '0.000000' });
  });
});

test('stopping the engine mid-delay and starting a new instance completes the run without duplicates', async () => {
  const f = await seed([text('a', 'x'), delay('d', 1, { after: ['a'] }), text('b', 'y', { after: ['d'] }), out('o', 'b')]);
  const h1 = harness();
  await h1.engine.start();
  const id = await start(h1, f, {}, 'alice');
  await waitStatus(id, 'suspended');
  await h1.engine.stop();
  const h2 = harness();
  await withEngine(h2, async () => {
    const run = await waitTerminal(id);
    assert.is(run.status, 'completed');
    const evs = await events(id);
    assertLogSound(evs);
    for (const n of ['a', 'd', 'b', 'o']) assert.is(evs.filter((e) => e.type === 'node.completed' && e.nodeId === n).length, 1);
    assert.is(run.charge_usd, '0.000200');
  });
});

/** An HTTP server that answers after `ms`, counting requests. */
async function slowServer(ms: number, body: string) {
  let hits = 0;
  const server = http.createServer((_req, res) => {
    hits++;
    const t = setTimeout(() => res.writeHead(200, { 'content-type': 'text/plain' }).end(body), ms);
    res.on('close', () => clearTimeout(t));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    hits: () => hits,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

test('a crash mid-step (lease left behind) is recovered by a new instance after the lease expires, without duplicates', async () => {
  const slow = await slowServer(600, 'slow body');
  try {
    const f = await seed([
      text('a', 'first'),
      { id: 'fetch', kind: 'http.request', method: 'GET', url: slow.url, after: ['a'] } as GraphNode,
      text('b', '{{fetch}}!'),
      out('o', 'b'),
    ]);
    const h1 = harness({ ALLOW_PRIVATE_NETWORK: '1' });
    await h1.engine.start();
    const id = await start(h1, f, {}, 'alice');
    await waitEvent(id, 'node.started', 'fetch');
    await waitFor('the request to reach the server', async () => slow.hits() >= 1);
    h1.engine.simulateCrash();
    const crashed = await runRow(id);
    assert.is(crashed.status, 'running');
    assert.is(crashed.lease_owner, h1.engine.instanceId, 'the dead instance still holds the lease');

    const h2 = harness({ ALLOW_PRIVATE_NETWORK: '1' });
    await withEngine(h2, async () => {
      const run = await waitTerminal(id);
      assert.is(run.status, 'completed');
      assert.equal(run.outputs[0]!.value, 'slow body!');
      const evs = await events(id);
      assertLogSound(evs);
      assert.is(evs.filter((e) => e.type === 'node.started' && e.nodeId === 'fetch').length, 1, 'the re-executed step is not announced twice');
      assert.is(deltaText(evs, 'fetch'), 'slow body');
      assert.ok(slow.hits() >= 2, 'the step ran again on the new instance');
      // Three completed steps, each charged once.
      assert.is(run.charge_usd, '0.000300');
      assert.is(Number(run.steps_executed), 3);
    });
  } finally {
    await slow.close();
  }
});

/** Runs the crash child (test/helpers/engine-crash-child.ts) and resolves with the first line starting with `prefix`. */
function child(args: string[], prefix: string) {
  const proc = spawn(process.execPath, ['--import', 'tsx', 'test/helpers/engine-crash-child.ts', ...args], {
    cwd: process.cwd(),
    env: process.env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  proc.stderr.on('data', (c: Buffer) => (err += c.toString()));
  const line = new Promise<string>((resolve, reject) => {
    proc.stdout.on('data', (c: Buffer) => {
      out += c.toString();
      const hit = out.split('\n').find((l) => l.startsWith(prefix));
      if (hit) resolve(hit.slice(prefix.length));
    });
    proc.on('exit', (code) => reject(new Error(`child exited (${code}) before "${prefix}": ${err.slice(-2000)}`)));
  });
  return { proc, line };
}

test('kill -9 of the process mid-step: a restarted process finishes the run without duplicate events or charges', async () => {
  const slow = await slowServer(1_500, 'survived');
  const dataDir = mkdtempSync(join(tmpdir(), 'engine-crash-'));
  try {
    if (process.env.DATABASE_URL) await resetDb(orm);
    const workflowId = randomUUID();
    const catalog = JSON.stringify({
      pricing: { stepUsd: STEP },
      accounts: [{ handle: 'alice', walletUsd: '1.000000', apiKeys: [{ secret: 'wr_alice_key', scopes: ['run:execute'] }] }],
      workflows: [
        {
          id: workflowId,
          owner: 'alice',
          name: 'Crash test',
          runModel: 'free',
          versions: [
            {
              label: 'v1',
              graph: {
                nodes: [
                  { id: 'a', kind: 'text.template', template: 'before' },
                  { id: 'fetch', kind: 'http.request', url: slow.url, after: ['a'] },
                  { id: 'b', kind: 'text.template', template: '{{a}} {{fetch}}' },
                  { id: 'o', kind: 'output', from: 'b' },
                ],
              },
            },
          ],
        },
      ],
    });
    const first = child(['start', dataDir, catalog, workflowId, 'fetch'], 'RUN ');
    const runId = (await first.line).trim();
    await waitFor('the request to reach the server', async () => slow.hits() >= 1);
    first.proc.kill('SIGKILL');
    await new Promise((r) => first.proc.once('close', r));

    const second = child(['finish', dataDir, runId], 'DONE ');
    const done = JSON.parse(await second.line) as { run: RunRow & { steps_executed: number }; events: Ev[] };
    await new Promise((r) => second.proc.once('close', r));
    assert.is(done.run.status, 'completed');
    assert.equal(done.run.outputs[0]!.value, 'before survived');
    assertLogSound(done.events);
    assert.is(done.events.filter((e) => e.type === 'node.started' && e.nodeId === 'fetch').length, 1);
    assert.is(deltaText(done.events, 'fetch'), 'survived');
    assert.is(done.run.steps_executed, 3);
    assert.is(done.run.charge_usd, '0.000300');
    assert.ok(slow.hits() >= 2, 'the interrupted request was made again');
  } finally {
    await slow.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('a crash while an LLM node streams resumes the stream without repeating published text', async () => {
  const chunks = ['Alpha ', 'beta ', 'gamma ', 'delta ', 'epsilon ', 'zeta.'];
  const stub = await startProviderStub({ chunks, delayMsBetweenChunks: 120 });
  try {
    const f = await seed([{ id: 'llm', kind: 'llm.chat', provider: 'openai', model: 'gpt-4o-mini', prompt: 'Say it' } as GraphNode, out('o', 'llm')]);
    const env = { OPENAI_API_KEY: 'sk-service', OPENAI_BASE_URL: stub.baseURLFor('openai') };
    const h1 = harness(env);
    await h1.engine.start();
    const id = await start(h1, f, {}, 'alice');
    await waitEvent(id, 'node.output.delta', 'llm');
    h1.engine.simulateCrash();
    const h2 = harness(env);
    await withEngine(h2, async () => {
      const run = await waitTerminal(id);
      assert.is(run.status, 'completed');
      assert.is(run.outputs[0]!.value, chunks.join(''));
      const evs = await events(id);
      assertLogSound(evs);
      assert.is(deltaText(evs, 'llm'), chunks.join(''), 'the deltas reproduce the output exactly once');
      assert.is(evs.filter((e) => e.type === 'node.started' && e.nodeId === 'llm').length, 1);
    });
  } finally {
    await stub.close();
  }
});

test('a service-hosted LLM step streams deltas and adds its token usage to the compute', async () => {
  const stub = await startProviderStub({ chunks: ['Hello', ', ', 'world', '!'] });
  try {
    const f = await seed([
      { id: 'topic', kind: 'input.text' } as GraphNode,
      { id: 'llm', kind: 'llm.chat', provider: 'openai', model: 'gpt-4o-mini', prompt: 'Write about {{topic}}' } as GraphNode,
      out('o', 'llm'),
    ]);
    const h = harness({ OPENAI_API_KEY: 'sk-service', OPENAI_BASE_URL: stub.baseURLFor('openai') });
    await withEngine(h, async () => {
      const id = await start(h, f, { topic: 'engines' }, 'alice');
      const run = await waitTerminal(id);
      assert.is(run.status, 'completed');
      assert.is(run.outputs[0]!.value, 'Hello, world!');
      const evs = await events(id);
      assertLogSound(evs);
      assert.is(deltaText(evs, 'llm'), 'Hello, world!');
      assert.match(JSON.stringify(stub.requests[0]!.body), /Write about engines/);
      // 0.0001 step + (11 × 0.15 + 7 × 0.60) / 1e6 = 0.00010585 → 0.000106 at 6 places.
      assert.is(STUB_INPUT_TOKENS * 0.15 + STUB_OUTPUT_TOKENS * 0.6, 5.85);
      assert.is(String(run.compute_usd), '0.000106');
      assert.is(run.charge_usd, '0.000106');
    });
  } finally {
    await stub.close();
  }
});

test('a BYOK run without a key suspends with wait_signal and supplied credentials resume it', async () => {
  const stub = await startProviderStub({ chunks: ['Hi', ' there'] });
  try {
    const f = await seed(
      [text('intro', 'Intro'), { id: 'llm', kind: 'llm.chat', provider: 'openai', model: 'gpt-4o-mini', prompt: '{{intro}}' } as GraphNode, out('o', 'llm')],
      { credentialMode: 'byok' },
    );
    const h = harness({ OPENAI_BASE_URL: stub.baseURLFor('openai') });
    await withEngine(h, async () => {
      const id = await start(h, f);
      const suspended = await waitStatus(id, 'suspended');
      assert.is(suspended.suspend_reason, 'wait_signal');
      const evs1 = await events(id);
      assert.equal(evs1.at(-1)!.data, { status: 'suspended', reason: 'wait_signal' });
      assert.is(stub.requests.length, 0, 'no provider call without a key');

      const publicRun = await supplyRunCredentials(h.deps, id, [{ provider: 'openai', apiKey: 'sk-buyer-key' }]);
      assert.is(publicRun.status, 'running');
      assert.is(publicRun.suspended, false);
      const run = await waitTerminal(id);
      assert.is(run.status, 'completed');
      assert.is(run.outputs[0]!.value, 'Hi there');
      assert.is(stub.requests[0]!.headers.authorization, 'Bearer sk-buyer-key');
      const evs = await events(id);
      assertLogSound(evs);
      assert.ok(evs.some((e) => e.type === 'run.resumed'));
      assert.is(evs.filter((e) => e.type === 'node.started' && e.nodeId === 'llm').length, 1);
      // BYOK usage costs nothing here: price + two steps.
      assert.is(run.charge_usd, '0.250200');
      const [secrets] = await db().execute<{ n: number }[]>('select count(*)::int as n from run_secrets where run_id = ?', [id]);
      assert.is(Number(secrets!.n), 0, 'supplied credentials are deleted when the run ends');
    });
  } finally {
    await stub.close();
  }
});

test('supplyRunCredentials rejects unknown runs and providers', async () => {
  await seed(threeSteps);
  const h = harness();
  try {
    await supplyRunCredentials(h.deps, randomUUID(), [{ provider: 'openai', apiKey: 'k' }]);
    assert.unreachable('should throw');
  } catch (e) {
    assert.is((e as { code?: string }).code, 'not_found');
  }
  try {
    await supplyRunCredentials(h.deps, randomUUID(), [{ provider: 'nope', apiKey: 'k' }]);
    assert.unreachable('should throw');
  } catch (e) {
    assert.is((e as { code?: string }).code, 'invalid_request');
  }
});

test('cancel while an LLM node streams aborts it; the late result never changes the run', async () => {
  const stub = await startProviderStub({ chunks: ['a', 'b', 'c', 'd', 'e', 'f'], delayMsBetweenChunks: 200 });
  try {
    const f = await seed([{ id: 'llm', kind: 'llm.chat', provider: 'openai', model: 'gpt-4o-mini', prompt: 'x' } as GraphNode, out('o', 'llm')]);
    const h = harness({ OPENAI_API_KEY: 'sk-service', OPENAI_BASE_URL: stub.baseURLFor('openai') });
    await withEngine(h, async () => {
      const id = await start(h, f);
      await waitEvent(id, 'node.started', 'llm');
      await cancelRun(h.deps, null, id);
      await new Promise((r) => setTimeout(r, 1_500));
      const run = await runRow(id);
      assert.is(run.status, 'cancelled');
      assert.is(run.billing_status, 'not_charged');
      const evs = await events(id);
      assertLogSound(evs);
      assert.is(evs.at(-1)!.type, 'run.cancelled');
      assert.not.ok(evs.some((e) => e.type === 'node.completed'));
      assert.equal(h.engine.activeRuns(), [], 'the driver is gone');
      assert.equal(await wallet('bob'), { balance: '10.000000', held: '0.000000' });
    });
  } finally {
    await stub.close();
  }
});

test('a BYOK run uses the account stored provider key without suspending', async () => {
  const stub = await startProviderStub({ chunks: ['stored', ' key'] });
  try {
    const f = await seed([{ id: 'llm', kind: 'llm.chat', provider: 'openai', model: 'gpt-4o-mini', prompt: 'x' } as GraphNode, out('o', 'llm')], {
      credentialMode: 'byok',
      bobProviderKeys: { openai: 'sk-stored-bob' },
    });
    const h = harness({ OPENAI_BASE_URL: stub.baseURLFor('openai') });
    await withEngine(h, async () => {
      const id = await start(h, f);
      const run = await waitTerminal(id);
      assert.is(run.status, 'completed');
      assert.is(stub.requests[0]!.headers.authorization, 'Bearer sk-stored-bob');
      assert.not.ok((await events(id)).some((e) => e.type === 'run.suspended'));
    });
  } finally {
    await stub.close();
  }
});

test('credentials supplied before the BYOK node runs are used and the run never waits for a signal', async () => {
  const stub = await startProviderStub({ chunks: ['early'] });
  try {
    const f = await seed(
      [delay('d', 0.5), { id: 'llm', kind: 'llm.chat', provider: 'openai', model: 'gpt-4o-mini', prompt: 'x', after: ['d'] } as GraphNode, out('o', 'llm')],
      { credentialMode: 'byok' },
    );
    const h = harness({ OPENAI_BASE_URL: stub.baseURLFor('openai') });
    await withEngine(h, async () => {
      const id = await start(h, f);
      await waitStatus(id, 'suspended');
      const during = await supplyRunCredentials(h.deps, id, [{ provider: 'openai', apiKey: 'sk-early' }]);
      assert.is(during.status, 'suspended', 'a timer suspension is not resumed by credentials');
      const run = await waitTerminal(id);
      assert.is(run.status, 'completed');
      assert.is(stub.requests[0]!.headers.authorization, 'Bearer sk-early');
      const evs = await events(id);
      assert.equal(
        evs.filter((e) => e.type === 'run.suspended').map((e) => e.data.reason),
        ['wait_timer'],
      );
    });
  } finally {
    await stub.close();
  }
});

test('an embedded admission round is one statement, and a run whose admission a database crash undid is started by nobody until admitted again', async () => {
  const f = await seed(threeSteps);
  const h = harness(); // the engine is never started: the test admits and starts the run itself
  const id = await start(h, f, { name: 'Ada' }, 'alice');
  const lease = { owner: 'test-holder', ttlMs: 30_000 };
  const { sql } = await statementsWhile(orm, () => admitQueuedRunsDetailed(h.deps, { capacity: 4, lease, expireQueued: false }));
  // Its commit does not wait for the disk (test/db/admission-round.test.ts): a crash may undo it.
  assert.equal(
    sql.filter((q) => !q.includes('workflow_versions')),
    [ADMIT_QUEUED.text],
    'the round is one statement',
  );
  // What a crash before the round reached the disk leaves: the run queued again, without a lease.
  await orm.em.fork().execute(`update runs set phase = 'queued', lease_owner = null, lease_until = null where id = ?`, [id]);
  assert.is(await startAdmitted(orm.em.fork(), id), null, "the driver's first write needs an admitted run");
  const [row] = await orm.em.fork().execute<{ status: string; phase: string }[]>('select status, phase from runs where id = ?', [id]);
  assert.equal({ ...row }, { status: 'pending', phase: 'queued' });
  const again = await admitQueuedRunsDetailed(h.deps, { capacity: 4, expireQueued: false });
  assert.equal(again.admitted, [id], 'admitted again');
});

test('the activities are idempotent: retried calls write no event or charge twice', async () => {
  const f = await seed([
    { id: 'name', kind: 'input.text' } as GraphNode,
    { id: 'c', kind: 'condition', value: '{{name}}', op: 'equals', operand: 'nobody' } as GraphNode,
    text('t1', 'Hi {{name}}'),
    text('never', 'x', { when: { node: 'c', is: true } }),
    out('o', 't1'),
  ]);
  const h = harness(); // the engine is never started: the test drives the activities itself
  const id = await start(h, f, { name: 'Ada' }, 'alice');
  assert.equal(await admitQueuedRuns(h.deps, { capacity: 4 }), [id]);
  assert.equal(await admitQueuedRuns(h.deps, { capacity: 4 }), [], 'an admitted run is not admitted again');
  const first = await prepareRun(h.deps, id);
  assert.is(first.started, true);
  assert.is(first.state?.status, 'running');
  const again = await prepareRun(h.deps, id);
  assert.equal(again, { status: 'running', started: false });

  let s = (await loadRunState(h.deps, id))!;
  const p1 = plan({ graph: s.graph, inputs: s.inputs, results: s.progress.results, timers: s.progress.timers, running: [], now: Date.now() });
  const free = p1.actions.filter((a): a is FreeAction => a.type !== 'execute');
  assert.ok(free.some((a) => a.type === 'skip' && a.nodeId === 'never'));
  assert.is((await applyActions(h.deps, id, free)).applied, true);
  const afterApply = (await events(id)).length;
  assert.is((await applyActions(h.deps, id, free)).applied, true);
  assert.is((await events(id)).length, afterApply, 'a retried applyActions writes nothing');

  const step1 = await executeStep(h.deps, { runId: id, nodeId: 't1' });
  assert.equal(step1, { type: 'recorded', result: { status: 'completed', value: 'Hi Ada' } });
  const afterStep = (await events(id)).length;
  const step2 = await executeStep(h.deps, { runId: id, nodeId: 't1' });
  assert.equal(step2, step1);
  const step3 = await executeStep(h.deps, { runId: id, nodeId: 't1', known: { results: {}, inputs: { name: 'Ada' } } });
  assert.equal(step3, step1, 'a hinted retry finds the recorded result too');
  assert.is((await events(id)).length, afterStep);
  assert.is(Number((await runRow(id)).steps_executed), 1);

  s = (await loadRunState(h.deps, id))!;
  const p2 = plan({ graph: s.graph, inputs: s.inputs, results: s.progress.results, timers: s.progress.timers, running: [], now: Date.now() });
  assert.ok(p2.finished);
  const rest = p2.actions.filter((a): a is FreeAction => a.type !== 'execute');
  assert.equal(await completeRun(h.deps, id, p2.finished!, rest), { completed: true });
  assert.equal(await completeRun(h.deps, id, p2.finished!, rest), { completed: false });
  const run = await runRow(id);
  assert.is(run.status, 'completed');
  assert.is(run.charge_usd, '0.000100');
  const evs = await events(id);
  assertLogSound(evs);
  assert.is(evs.filter((e) => e.type === 'run.completed').length, 1);
});

test("the runs of one version share its graph, frozen, and the interpreter's analysis of it", async () => {
  const f = await seed(threeSteps, { priceUsd: '0' });
  const h = harness(); // not started: the runs stay queued, their state is only read
  const [a, b] = [await start(h, f, { name: 'Ada' }), await start(h, f, { name: 'Bo' })];
  const [sa, sb] = [(await loadRunState(h.deps, a))!, (await loadRunState(h.deps, b))!];
  assert.is(sa.graph, sb.graph);
  assert.ok(Object.isFrozen(sa.graph.nodes[1]), 'nothing can edit what every run of the version reads');
  assert.is(analyseGraph(sa.graph), analyseGraph(sb.graph));
});

test('100 template runs end to end (throughput)', async () => {
  const f = await seed(threeSteps, { priceUsd: '0' });
  const h = harness({ RUN_CAPACITY: '16' });
  await withEngine(h, async () => {
    const t0 = performance.now();
    const ids = await Promise.all(Array.from({ length: 100 }, () => start(h, f, { name: 'x' }, 'alice')));
    const accepted = performance.now();
    await waitFor(
      'all runs to end',
      async () => {
        const [r] = await db().execute<{ n: number }[]>(`select count(*)::int as n from runs where status = 'completed'`);
        return Number(r!.n) === ids.length;
      },
      60_000,
    );
    const ms = performance.now() - t0;
    console.log(
      `  [throughput ${process.env.DATABASE_URL ? 'postgres' : 'pglite'}] 100 runs: accepted in ${Math.round(accepted - t0)} ms, all completed in ${Math.round(ms)} ms (${Math.round(100_000 / ms)} runs/s)`,
    );
    const [bad] = await db().execute<{ n: number }[]>(
      `select count(*)::int as n from runs r where (select count(*) from run_events e where e.run_id = r.id) <> r.last_sequence`,
    );
    assert.is(Number(bad!.n), 0, 'every log is gap-free');
  });
});

test.run();
