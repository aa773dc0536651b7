import { createClient, type Client } from 'graphql-sse';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { EmbeddedEngine } from '../../src/engine/embedded/embedded-engine.ts';
import { startProviderStub, type ProviderStub } from '../helpers/provider-stub.ts';
import { BOB_SECRET, TOKEN, errorCodes, startHarness, type Harness } from './helpers/harness.ts';
import { QUICK_EMBEDDED } from '../helpers/engine-fixtures.ts';

/**
 * End to end over HTTP with the real embedded engine: a BYOK run suspends with wait_signal, the
 * `supplyRunCredentials` mutation (the credentials signal) resumes it, and the `runEvents`
 * subscription sees the whole story live, through to the terminal event.
 */

const BYOK = '33333333-3333-4333-8333-333333333333';
const catalog = JSON.stringify({
  pricing: { stepUsd: '0.000100', models: { 'gpt-4o-mini': { input: '0.15', output: '0.60' } } },
  accounts: [
    { handle: 'alice', walletUsd: '10.000000' },
    { handle: 'bob', walletUsd: '10.000000', apiKeys: [{ secret: BOB_SECRET, scopes: ['run:execute', 'run:read'], rateLimitPerMinute: 1000 }] },
  ],
  workflows: [
    {
      id: BYOK,
      owner: 'alice',
      name: 'Bring your own key',
      runModel: 'per_run',
      priceUsd: '0.250000',
      credentialMode: 'byok',
      versions: [
        {
          label: 'v1',
          graph: {
            nodes: [
              { id: 'intro', kind: 'text.template', template: 'Intro' },
              { id: 'llm', kind: 'llm.chat', provider: 'openai', model: 'gpt-4o-mini', prompt: '{{intro}}' },
              { id: 'o', kind: 'output', from: 'llm', name: 'answer', type: 'text' },
            ],
          },
        },
      ],
    },
  ],
});

let h: Harness;
let stub: ProviderStub;
let client: Client;

test.before(async () => {
  stub = await startProviderStub({ chunks: ['Hi', ' there'] });
  h = await startHarness({ OPENAI_BASE_URL: stub.baseURLFor('openai') }, { catalog, engine: (deps) => new EmbeddedEngine(deps, QUICK_EMBEDDED) });
  client = createClient({ url: `${h.url}/graphql/stream`, headers: { Authorization: `Bearer ${TOKEN}` }, fetchFn: fetch, retryAttempts: 0 });
});

test.after(async () => {
  client?.dispose();
  await h?.close();
  await stub?.close();
});

type Ev = { type: string; sequence: number; nodeId: string | null; data: Record<string, string> };

test('supplied credentials resume a suspended BYOK run, seen live by the subscription', async () => {
  const id = await h.startRun(BOB_SECRET, BYOK, {});
  const SUPPLY = `mutation($id: ID!) { supplyRunCredentials(runId: $id, credentials: [{ provider: "openai", apiKey: "sk-buyer-key" }]) { id status suspended } }`;
  const events: Ev[] = [];
  let supplied: Awaited<ReturnType<typeof h.gql>> | undefined;
  const iterator = client.iterate<{ runEvents: Ev }>({
    query: `subscription($id: ID!) { runEvents(runId: $id) { type sequence nodeId data } }`,
    variables: { id },
  });
  const timer = setTimeout(() => void iterator.return?.(), 20_000);
  try {
    for await (const result of iterator) {
      assert.is(result.errors, undefined);
      const ev = result.data!.runEvents;
      events.push(ev);
      if (ev.type === 'run.suspended') {
        assert.equal(ev.data, { status: 'suspended', reason: 'wait_signal' });
        const run = await h.gql<{ run: { status: string; suspended: boolean; suspendReason: string } }>(
          `query($id: ID!) { run(id: $id) { status suspended suspendReason } }`,
          { id },
        );
        assert.equal(run.body.data!.run, { status: 'SUSPENDED', suspended: true, suspendReason: 'wait_signal' });
        assert.is(stub.requests.length, 0, 'no provider call without a key');
        supplied = await h.gql(SUPPLY, { id });
      }
    }
  } finally {
    clearTimeout(timer);
  }
  assert.ok(supplied, 'the run suspended');
  assert.is(supplied!.status, 200, supplied!.text);
  assert.equal(errorCodes(supplied!), []);
  const types = events.map((e) => e.type);
  assert.equal(
    events.map((e) => e.sequence),
    events.map((_, i) => i + 1),
    'every event once, in order',
  );
  assert.ok(types.indexOf('run.suspended') < types.indexOf('run.resumed'));
  assert.is(types.at(-1), 'run.completed');
  assert.is(stub.requests[0]!.headers.authorization, 'Bearer sk-buyer-key');

  const done = await h.gql<{
    run: { status: string; outcome: string; outputs: { name: string; value: string }[]; billingStatus: string; displayedChargeUsd: string };
  }>(`query($id: ID!) { run(id: $id) { status outcome outputs billingStatus displayedChargeUsd } }`, { id });
  const run = done.body.data!.run;
  assert.is(run.status, 'COMPLETED');
  assert.is(run.outcome, 'COMPLETED');
  assert.is(run.outputs[0]!.value, 'Hi there');
  assert.is(run.billingStatus, 'SETTLED');
  // BYOK usage is on the buyer's key: creator price + two steps.
  assert.is(run.displayedChargeUsd, '0.250200');
  assert.not.match(JSON.stringify(events), 'sk-buyer-key');
});

test.run();
