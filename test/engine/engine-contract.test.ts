import { randomBytes, randomUUID } from 'node:crypto';
import pino from 'pino';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { parseCatalog } from '../../src/catalog/parse-catalog.ts';
import { loadCatalog } from '../../src/catalog/load-catalog.ts';
import { loadConfig } from '../../src/config/config.ts';
import type { Orm } from '../../src/db/orm.ts';
import { json } from '../../src/db/sql.ts';
import type { GraphNode } from '../../src/domain/graph/types.ts';
import { EmbeddedEngine } from '../../src/engine/embedded/embedded-engine.ts';
import { Sealer } from '../../src/security/crypto.ts';
import { authenticateKey } from '../../src/services/auth/authenticate-key.ts';
import type { Deps } from '../../src/runs/deps.ts';
import { InProcessRunEventBus } from '../../src/services/events/bus.ts';
import { cancelRun } from '../../src/runs/cancel-run.ts';
import { startRun } from '../../src/runs/start-run.ts';
import { supplyRunCredentials } from '../../src/runs/supply-run-credentials.ts';
import { resetDb, testOrm } from '../helpers/db.ts';
import { startProviderStub } from '../helpers/provider-stub.ts';
import { countTemporal, temporalAddress } from '../helpers/temporal.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { QUICK_EMBEDDED } from '../helpers/engine-fixtures.ts';

/**
 * The engine integration suite, written once and run against every engine available:
 *
 * - `embedded` always;
 * - `temporal` when TEMPORAL_ADDRESS is set and a Temporal server answers there: a TemporalEngine (the
 *   API side) and an in-process Temporal worker (the `npm run worker` side) on a private task queue.
 *   Otherwise a line says why it is skipped and no temporal test is registered.
 *
 * Every scenario goes through the real services (startRun, cancelRun, supplyRunCredentials) and checks
 * the database: statuses, the event log and the money.
 */

const orm: Orm = await testOrm();
const sealer = new Sealer(randomBytes(32));
const STEP = '0.000100';
const PRICE = '0.250000';

interface EngineHarness {
  name: string;
  deps: Deps;
  /** Generous for a real Temporal round trip. */
  timeoutMs: number;
  close(): Promise<void>;
}

type Factory = { name: string; make(env: Record<string, string>): Promise<EngineHarness> };

function baseDeps(env: Record<string, string>) {
  const config = loadConfig({ CATALOG_FILE: 'none', LOG_LEVEL: 'silent', ...env });
  return { config, orm, log: pino({ level: 'silent' }), sealer, bus: new InProcessRunEventBus(), baseUrl: () => 'http://localhost:8080/v1' };
}

const embedded: Factory = {
  name: 'embedded',
  async make(env) {
    const base = baseDeps(env);
    const engine = new EmbeddedEngine(base, QUICK_EMBEDDED);
    await engine.start();
    return { name: 'embedded', deps: { ...base, engine }, timeoutMs: 10_000, close: () => engine.stop() };
  },
};

/** The Temporal factory, or null when the Temporal half does not run here (helpers/temporal.ts). */
async function temporalFactory(): Promise<Factory | null> {
  const address = temporalAddress('engine contract');
  if (!address) return null;

  const { startLiveHarness } = await import('../helpers/live-temporal.ts');
  return {
    name: 'temporal',
    async make(env) {
      const h = await startLiveHarness(orm, address, env, sealer);
      return { name: 'temporal', deps: h.deps, timeoutMs: 30_000, close: () => h.close() };
    },
  };
}

const factories: Factory[] = [embedded];
const temporal = await temporalFactory();
if (temporal) factories.push(temporal);

// ---------------------------------------------------------------------------------------------------
// Fixtures and probes

interface Fixture {
  workflowId: string;
}

async function seed(nodes: GraphNode[], o: { credentialMode?: 'service_hosted' | 'byok' } = {}): Promise<Fixture> {
  await resetDb(orm);
  const workflowId = randomUUID();
  const catalog = {
    pricing: { stepUsd: STEP, models: { 'gpt-4o-mini': { input: '0.15', output: '0.60' } } },
    accounts: [
      { handle: 'alice', walletUsd: '10.000000', apiKeys: [{ secret: 'wr_alice_key', scopes: ['run:execute', 'run:read'] }] },
      { handle: 'bob', walletUsd: '10.000000', apiKeys: [{ secret: 'wr_bob_key', scopes: ['run:execute', 'run:read'], rateLimitPerMinute: 1000 }] },
    ],
    workflows: [
      {
        id: workflowId,
        owner: 'alice',
        name: 'Engine contract',
        runModel: 'per_run',
        priceUsd: PRICE,
        credentialMode: o.credentialMode ?? 'service_hosted',
        versions: [{ id: randomUUID(), label: 'v1', graph: { nodes } }],
      },
    ],
  };
  await loadCatalog(orm, parseCatalog(JSON.stringify(catalog), 'test'), { sealer });
  return { workflowId };
}

async function start(h: EngineHarness, f: Fixture, inputs: Record<string, unknown> = {}, who: 'bob' | 'alice' = 'bob'): Promise<string> {
  const principal = await authenticateKey(h.deps, `Bearer wr_${who}_key`);
  const { run } = await startRun(h.deps, principal, { body: { workflow: f.workflowId, inputs } });
  return run.id;
}

const db = () => orm.em.fork();

async function runRow(id: string) {
  const [r] = await db().execute<Record<string, unknown>[]>('select * from runs where id = ?', [id]);
  return {
    status: String(r!.status),
    outcome: (r!.outcome as string | null) ?? null,
    reason: (r!.reason as string | null) ?? null,
    billing_status: String(r!.billing_status),
    charge_usd: r!.charge_usd === null ? null : String(r!.charge_usd),
    suspend_reason: (r!.suspend_reason as string | null) ?? null,
    outputs: json<{ nodeId: string; value: unknown }[]>(r!.outputs),
  };
}

async function events(id: string) {
  const rows = await db().execute<Record<string, unknown>[]>('select type, sequence, node_id, data from run_events where run_id = ? order by sequence', [id]);
  return rows.map((r) => ({
    type: String(r.type),
    sequence: Number(r.sequence),
    nodeId: (r.node_id as string | null) ?? null,
    data: json<Record<string, string>>(r.data),
  }));
}

const shape = (evs: Awaited<ReturnType<typeof events>>) =>
  evs.filter((e) => e.type !== 'node.output.delta').map((e) => `${e.type}${e.nodeId ? `:${e.nodeId}` : ''}`);

const waitStatus = (h: EngineHarness, id: string, statuses: string[]) =>
  waitFor(
    `run ${id} to be ${statuses.join('/')}`,
    async () => {
      const r = await runRow(id);
      return statuses.includes(r.status) ? r : null;
    },
    h.timeoutMs,
  );
const waitTerminal = (h: EngineHarness, id: string) => waitStatus(h, id, ['completed', 'failed', 'cancelled']);

async function wallet(handle: string) {
  const [w] = await db().execute<{ balance_usd: string; held_usd: string }[]>(
    'select w.balance_usd, w.held_usd from wallets w join accounts a on a.id = w.account_id where a.handle = ?',
    [handle],
  );
  return { balance: String(w!.balance_usd), held: String(w!.held_usd) };
}

function assertLogSound(evs: Awaited<ReturnType<typeof events>>): void {
  assert.equal(
    evs.map((e) => e.sequence),
    evs.map((_, i) => i + 1),
    'sequences are 1..n without gaps',
  );
  for (const type of ['node.started', 'node.completed', 'node.failed', 'node.skipped']) {
    const ids = evs.filter((e) => e.type === type).map((e) => e.nodeId);
    assert.equal(ids.length, new Set(ids).size, `each ${type} at most once per node`);
  }
}

const text = (id: string, template: string, extra: Record<string, unknown> = {}) => ({ id, kind: 'text.template', template, ...extra }) as GraphNode;
const out = (id: string, from: string, extra: Record<string, unknown> = {}) => ({ id, kind: 'output', from, ...extra }) as GraphNode;
const delay = (id: string, seconds: number, extra: Record<string, unknown> = {}) => ({ id, kind: 'delay', seconds, ...extra }) as GraphNode;

async function withEngine(factory: Factory, env: Record<string, string>, fn: (h: EngineHarness) => Promise<void>): Promise<void> {
  const h = await factory.make(env);
  try {
    await fn(h);
  } finally {
    await h.close();
  }
}

// ---------------------------------------------------------------------------------------------------
// The scenarios, once per engine

for (const factory of factories) {
  const name = factory.name;
  const t = (title: string, fn: () => Promise<void>) => test(title, name === 'temporal' ? countTemporal(fn) : fn);

  t(`[${name}] a template run completes with events in order and the exact charge`, async () => {
    const f = await seed([
      { id: 'name', kind: 'input.text', required: true } as GraphNode,
      text('t1', 'Hello {{name}}.'),
      text('t2', '{{t1}} {{t1}}'),
      text('t3', '{{t2}} The end.'),
      out('result', 't3', { name: 'Result', type: 'text' }),
    ]);
    await withEngine(factory, {}, async (h) => {
      const id = await start(h, f, { name: 'Ada' });
      const run = await waitTerminal(h, id);
      assert.is(run.status, 'completed');
      assert.is(run.outcome, 'completed');
      assert.equal(
        run.outputs.map((o) => o.value),
        ['Hello Ada. Hello Ada. The end.'],
      );
      const evs = await events(id);
      assertLogSound(evs);
      assert.equal(shape(evs), [
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
      // Creator price + three steps, settled once.
      assert.is(run.charge_usd, '0.250300');
      assert.is(run.billing_status, 'settled');
      assert.equal(await wallet('bob'), { balance: '9.749700', held: '0.000000' });
    });
  });

  t(`[${name}] a delay suspends the run with wait_timer and it resumes by itself`, async () => {
    const f = await seed([text('a', 'before'), delay('wait', 1, { after: ['a'] }), text('b', 'after', { after: ['wait'] }), out('o', 'b')]);
    await withEngine(factory, {}, async (h) => {
      const t0 = Date.now();
      const id = await start(h, f, {}, 'alice');
      const suspended = await waitStatus(h, id, ['suspended']);
      assert.is(suspended.suspend_reason, 'wait_timer');
      const run = await waitTerminal(h, id);
      assert.ok(Date.now() - t0 >= 1_000, 'the delay lasted at least its seconds');
      assert.is(run.status, 'completed');
      const evs = await events(id);
      assertLogSound(evs);
      assert.equal(shape(evs).slice(3), [
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
      assert.is(run.charge_usd, '0.000200', 'the owner pays two steps');
    });
  });

  t(`[${name}] cancel during a delay: cancelled, not charged, the late timer changes nothing`, async () => {
    const f = await seed([text('a', 'x'), delay('d', 1, { after: ['a'] }), text('b', 'y', { after: ['d'] }), out('o', 'b')]);
    await withEngine(factory, {}, async (h) => {
      const id = await start(h, f);
      await waitStatus(h, id, ['suspended']);
      assert.equal(await cancelRun(h.deps, null, id), { id, status: 'cancelled', cancelRequested: true });
      await new Promise((r) => setTimeout(r, 1_500)); // past the delay's due time
      const run = await runRow(id);
      assert.is(run.status, 'cancelled');
      assert.is(run.billing_status, 'not_charged');
      assert.is(run.charge_usd, null);
      assert.equal(await wallet('bob'), { balance: '10.000000', held: '0.000000' });
      const evs = await events(id);
      assertLogSound(evs);
      assert.is(evs.at(-1)!.type, 'run.cancelled');
      assert.not.ok(
        evs.some((e) => e.nodeId === 'b'),
        'nothing after the delay ran',
      );
    });
  });

  t(`[${name}] a BYOK run without a key waits for credentials (wait_signal) and supplied credentials resume it`, async () => {
    const stub = await startProviderStub({ chunks: ['Hi', ' there'] });
    try {
      const f = await seed(
        [text('intro', 'Intro'), { id: 'llm', kind: 'llm.chat', provider: 'openai', model: 'gpt-4o-mini', prompt: '{{intro}}' } as GraphNode, out('o', 'llm')],
        { credentialMode: 'byok' },
      );
      await withEngine(factory, { OPENAI_BASE_URL: stub.baseURLFor('openai') }, async (h) => {
        const id = await start(h, f);
        const suspended = await waitStatus(h, id, ['suspended']);
        assert.is(suspended.suspend_reason, 'wait_signal');
        assert.is(stub.requests.length, 0, 'no provider call without a key');
        const publicRun = await supplyRunCredentials(h.deps, id, [{ provider: 'openai', apiKey: 'sk-buyer-key' }]);
        assert.is(publicRun.status, 'running', 'the answer already shows the run resumed');
        const run = await waitTerminal(h, id);
        assert.is(run.status, 'completed');
        assert.equal(
          run.outputs.map((o) => o.value),
          ['Hi there'],
        );
        assert.is(stub.requests[0]!.headers.authorization, 'Bearer sk-buyer-key');
        const evs = await events(id);
        assertLogSound(evs);
        assert.ok(evs.some((e) => e.type === 'run.resumed'));
        assert.is(run.charge_usd, '0.250200', 'price + two steps; BYOK usage costs nothing here');
      });
    } finally {
      await stub.close();
    }
  });

  t(`[${name}] a run waiting for credentials past CREDENTIALS_WAIT_SECONDS fails, charged the steps that ran, and frees its slot`, async () => {
    const f = await seed(
      [text('intro', 'Intro'), { id: 'llm', kind: 'llm.chat', provider: 'openai', model: 'gpt-4o-mini', prompt: '{{intro}}' } as GraphNode, out('o', 'llm')],
      { credentialMode: 'byok' },
    );
    await withEngine(factory, { CREDENTIALS_WAIT_SECONDS: '1', RUN_CAPACITY: '1' }, async (h) => {
      const waiting = await start(h, f);
      assert.is((await waitStatus(h, waiting, ['suspended'])).suspend_reason, 'wait_signal');
      const queued = await start(h, f);
      const run = await waitTerminal(h, waiting);
      assert.is(run.status, 'failed');
      assert.is(run.reason, 'the run waited too long for credentials');
      assert.ok(Number(run.charge_usd) < Number(PRICE), `not charged the price, nor for the wait (${run.charge_usd})`);
      assert.is(shape(await events(waiting)).at(-1), 'run.failed');
      // Its slot went to the run queued behind it, which reached its own wait for credentials.
      assert.is((await waitStatus(h, queued, ['suspended'])).suspend_reason, 'wait_signal');
    });
  });

  t(`[${name}] a failing node skips its dependents and the run is completed_with_issues, charged the completed steps`, async () => {
    const f = await seed([
      text('raw', 'not json'),
      { id: 'parsed', kind: 'json.parse', from: 'raw' } as GraphNode,
      text('other', 'fine'),
      out('out_parsed', 'parsed'),
      out('out_other', 'other'),
    ]);
    await withEngine(factory, {}, async (h) => {
      const id = await start(h, f);
      const run = await waitTerminal(h, id);
      assert.is(run.status, 'completed');
      assert.is(run.outcome, 'completed_with_issues');
      assert.equal(
        run.outputs.map((o) => o.nodeId),
        ['out_other'],
      );
      const evs = await events(id);
      assertLogSound(evs);
      assert.equal(evs.find((e) => e.type === 'node.failed')?.data, { reason: 'invalid JSON in parsed' });
      assert.equal(evs.find((e) => e.type === 'node.skipped')?.data, { reason: 'upstream_failed' });
      assert.is(run.charge_usd, '0.000200', 'two completed steps, no creator price');
      assert.equal(await wallet('bob'), { balance: '9.999800', held: '0.000000' });
    });
  });

  t(`[${name}] a run whose output is about 5 MB completes (values stay in the database, never in an engine message)`, async () => {
    const f = await seed([
      { id: 'word', kind: 'input.text', required: true } as GraphNode,
      text('kb', '{{word}}'.repeat(100)),
      text('mb', '{{kb}}'.repeat(100)),
      out('big', 'mb', { name: 'Big', type: 'text' }),
    ]);
    await withEngine(factory, {}, async (h) => {
      const word = 'abcdefghij'.repeat(50);
      const id = await start(h, f, { word });
      const run = await waitTerminal(h, id);
      assert.is(run.status, 'completed');
      assert.is(run.outcome, 'completed');
      const value = run.outputs[0]!.value as string;
      assert.is(value.length, 5_000_000);
      assert.is(value, word.repeat(10_000));
      assert.is(run.charge_usd, '0.250200');
    });
  });
}

test.run();
