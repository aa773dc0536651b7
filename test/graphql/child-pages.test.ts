import { randomUUID } from 'node:crypto';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { AccountSchema, LedgerEntrySchema, WebhookDeliverySchema, WebhookEndpointSchema, WorkflowVersionSchema } from '../../src/db/entities/index.ts';
import { ALICE_SECRET, BOB_SECRET, GREETER, PRIVATE_TOOL, startHarness, type Harness } from './helpers/harness.ts';

/**
 * Paged children of many parents come from one statement per page size (src/graphql/queries/pages.ts):
 * each parent's page must be what reading that parent alone gives, and an endpoint's secret never
 * leaves the database.
 */

let h: Harness;
const deliveries: Record<string, string[]> = { alice: [], bob: [] };

test.before(async () => {
  h = await startHarness();
  for (let i = 0; i < 3; i++) await h.startRun(ALICE_SECRET, GREETER, { name: `a${i}`, place: 'here' });
  for (let i = 0; i < 3; i++) await h.startRun(BOB_SECRET, PRIVATE_TOOL, { name: `b${i}` });
  const em = h.em();
  const alice = await em.findOneOrFail(AccountSchema, { handle: 'alice' });
  const bob = await em.findOneOrFail(AccountSchema, { handle: 'bob' });
  const aliceEndpoint = await em.findOneOrFail(WebhookEndpointSchema, { accountId: alice.id });
  const bobEndpoint = em.create(WebhookEndpointSchema, { id: randomUUID(), accountId: bob.id, url: 'https://example.test/bob', secretCiphertext: 'sealed' });
  // A few more ledger rows per account than the catalog's credit.
  for (const accountId of [alice.id, bob.id, alice.id, bob.id, alice.id]) {
    em.create(LedgerEntrySchema, { accountId, kind: 'credit', amountUsd: '0.000001', balanceAfterUsd: '1.000000' });
  }
  await em.flush();
  const [run] = await em.execute<{ id: string }[]>('select id from runs limit 1');
  // Settled deliveries (not pending), so the outbox worker leaves them alone; one second apart, oldest first.
  const start = Date.now() - 60_000;
  for (let i = 0; i < 4; i++) {
    for (const [who, endpoint] of [
      ['alice', aliceEndpoint],
      ['bob', bobEndpoint],
    ] as const) {
      const id = `msg_${who}_${i}`;
      em.create(WebhookDeliverySchema, {
        id,
        endpointId: endpoint.id,
        runId: run!.id,
        eventType: 'run.completed',
        status: 'delivered',
        attempts: 1,
        nextAttemptAt: new Date(start),
        createdAt: new Date(start + i * 1000 + (who === 'bob' ? 500 : 0)),
      });
      deliveries[who]!.unshift(id);
    }
  }
  await em.flush();
});

test.after(async () => {
  await h?.close();
});

test("ledger, versions and deliveries pages of several parents are each parent's own page", async () => {
  type Account = { handle: string; ledger: { id: string }[]; webhookDeliveries: { id: string; endpointUrl: string }[] };
  type Page = { runs: { runs: { account: Account; workflow: { id: string; versions: { label: string }[] } }[] } };
  const res = await h.gql<Page>(`{ runs(limit: 100) { runs {
    account { handle ledger(offset: 1, limit: 2) { id } webhookDeliveries(offset: 1, limit: 2) { id endpointUrl } }
    workflow { id versions(offset: 1, limit: 1) { label } } } } }`);
  assert.is(res.status, 200, res.text);
  assert.not.match(res.text, 'sealed');
  const runs = res.body.data!.runs.runs;
  const em = h.em();
  for (const handle of ['alice', 'bob']) {
    const account = runs.find((r) => r.account.handle === handle)!.account;
    const { id } = await em.findOneOrFail(AccountSchema, { handle });
    const ledger = await em.find(LedgerEntrySchema, { accountId: id }, { orderBy: { id: 'desc' }, offset: 1, limit: 2 });
    assert.ok(ledger.length > 0, `${handle} has ledger entries past the first`);
    assert.equal(
      account.ledger.map((e) => e.id),
      ledger.map((e) => String(e.id)),
      `${handle}'s ledger page`,
    );
    assert.equal(
      account.webhookDeliveries.map((d) => d.id),
      deliveries[handle]!.slice(1, 3),
      `${handle}'s deliveries page`,
    );
    assert.ok(account.webhookDeliveries.every((d) => d.endpointUrl === (handle === 'bob' ? 'https://example.test/bob' : 'https://example.test/hooks')));
  }
  const greeter = runs.find((r) => r.workflow.id === GREETER)!.workflow;
  const tool = runs.find((r) => r.workflow.id === PRIVATE_TOOL)!.workflow;
  const second = await em.find(WorkflowVersionSchema, { workflowId: GREETER }, { orderBy: { createdAt: 'desc', id: 'desc' }, offset: 1, limit: 1 });
  assert.equal(
    greeter.versions,
    second.map((v) => ({ label: v.label })),
  );
  assert.equal(tool.versions, [], 'a workflow with one version has nothing after the first');
});

test("run events of several runs are each run's own, after the cursor", async () => {
  const [first, second] = (await h.em().execute<{ id: string }[]>('select id from runs order by created_at, id limit 2')).map((r) => r.id);
  await h.appendEvents(first!, [
    { type: 'run.preparing', data: { status: 'pending' } },
    { type: 'run.started', data: { status: 'running' } },
  ]);
  type Page = { runs: { runs: { id: string; events: { runId: string; sequence: number; type: string }[] }[] } };
  const res = await h.gql<Page>('{ runs(limit: 100) { runs { id events(afterSequence: 1, limit: 1) { runId sequence type } } } }');
  assert.is(res.status, 200, res.text);
  const byId = new Map(res.body.data!.runs.runs.map((r) => [r.id, r.events]));
  assert.equal(byId.get(first!), [{ runId: first, sequence: 2, type: 'run.preparing' }]);
  assert.equal(byId.get(second!), []);
});

test.run();
