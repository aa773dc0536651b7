import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ALICE_SECRET, BOB_SECRET, GREETER, PRIVATE_TOOL, errorCodes, startHarness, type Harness } from './helpers/harness.ts';

let h: Harness;

test.before(async () => {
  h = await startHarness();
});

test.after(async () => {
  await h?.close();
});

const CANCEL = `mutation($id: ID!) { cancelRun(id: $id) { id status billingStatus displayedChargeUsd completedAt lastSequence events { type sequence } } }`;
type Cancelled = {
  cancelRun: {
    id: string;
    status: string;
    billingStatus: string;
    displayedChargeUsd: string | null;
    completedAt: string | null;
    lastSequence: number;
    events: { type: string; sequence: number }[];
  };
};

test("cancelRun cancels any account's pending run, uncharged, with its terminal event", async () => {
  const id = await h.startRun(BOB_SECRET, PRIVATE_TOOL, { name: 'x' });
  const res = await h.gql<Cancelled>(CANCEL, { id });
  assert.is(res.status, 200, res.text);
  const run = res.body.data!.cancelRun;
  assert.is(run.id, id);
  assert.is(run.status, 'CANCELLED');
  assert.is(run.billingStatus, 'NOT_CHARGED');
  assert.is(run.displayedChargeUsd, null);
  assert.ok(run.completedAt);
  assert.equal(
    run.events.map((e) => e.type),
    ['run.queued', 'run.cancelled'],
  );
  assert.is(run.lastSequence, 2);
});

test('cancelRun of a finished run returns it unchanged', async () => {
  const id = await h.startRun(ALICE_SECRET, GREETER, { name: 'x', place: 'y' });
  await h.gql(CANCEL, { id });
  const again = await h.gql<Cancelled>(CANCEL, { id });
  assert.is(again.status, 200);
  assert.is(again.body.data!.cancelRun.status, 'CANCELLED');
  assert.is(again.body.data!.cancelRun.lastSequence, 2);
});

test('cancelRun of an unknown run answers NOT_FOUND and no data', async () => {
  for (const id of ['00000000-0000-4000-8000-000000000000', 'nope']) {
    const res = await h.gql(CANCEL, { id });
    assert.equal(errorCodes(res), ['NOT_FOUND']);
    assert.is(res.body.data, null);
  }
});

const ACCEPT = `mutation($w: ID!, $a: String!) { acceptWorkflowUpdate(workflowId: $w, accountHandle: $a) { id activeVersionId activeVersion { label } } }`;
const PURCHASES = `query($a: String!) { account(handle: $a) { purchases { workflowId pinnedVersionId updateAvailable pinnedVersion { label } } } }`;

test('acceptWorkflowUpdate re-pins a buyer to the active version', async () => {
  type P = { account: { purchases: { pinnedVersionId: string; updateAvailable: boolean; pinnedVersion: { label: string } }[] } };
  const before = await h.gql<P>(PURCHASES, { a: 'bob' });
  assert.equal(before.body.data!.account.purchases[0]!.pinnedVersion, { label: 'v1' });
  const res = await h.gql<{ acceptWorkflowUpdate: { id: string; activeVersionId: string; activeVersion: { label: string } } }>(ACCEPT, {
    w: GREETER,
    a: 'bob',
  });
  assert.is(res.status, 200, res.text);
  assert.is(res.body.data!.acceptWorkflowUpdate.id, GREETER);
  assert.equal(res.body.data!.acceptWorkflowUpdate.activeVersion, { label: 'v2' });
  const after = await h.gql<P>(PURCHASES, { a: 'bob' });
  const p = after.body.data!.account.purchases[0]!;
  assert.is(p.pinnedVersionId, res.body.data!.acceptWorkflowUpdate.activeVersionId);
  assert.is(p.updateAvailable, false);
  // Already on the active version: unchanged, no error.
  const again = await h.gql(ACCEPT, { w: GREETER, a: 'bob' });
  assert.is(again.status, 200);
  assert.is(again.body.errors, undefined);
});

test('acceptWorkflowUpdate answers FORBIDDEN without a purchase and NOT_FOUND for an unknown account', async () => {
  const forbidden = await h.gql(ACCEPT, { w: GREETER, a: 'carol' });
  assert.equal(errorCodes(forbidden), ['FORBIDDEN']);
  assert.is(forbidden.body.data, null);
  const unknown = await h.gql(ACCEPT, { w: GREETER, a: 'nobody' });
  assert.equal(errorCodes(unknown), ['NOT_FOUND']);
});

const SUPPLY = `mutation($id: ID!, $c: [ProviderCredentialInput!]!) { supplyRunCredentials(runId: $id, credentials: $c) { id status } }`;

test('supplyRunCredentials seals the credentials for the run and returns it', async () => {
  const id = await h.startRun(ALICE_SECRET, GREETER, { name: 'x', place: 'y' });
  const res = await h.gql<{ supplyRunCredentials: { id: string; status: string } }>(SUPPLY, { id, c: [{ provider: 'openai', apiKey: 'sk-test-123' }] });
  assert.is(res.status, 200, res.text);
  assert.equal(res.body.data!.supplyRunCredentials, { id, status: 'PENDING' });
  const rows = await h
    .em()
    .execute<{ name: string; ciphertext: string }[]>(`select name, ciphertext from run_secrets where run_id = ? and kind = 'provider_credential'`, [id]);
  assert.equal(
    rows.map((r) => r.name),
    ['openai'],
  );
  assert.not.match(rows[0]!.ciphertext, 'sk-test-123');
  assert.is(h.app.deps.sealer.open(rows[0]!.ciphertext), 'sk-test-123');
});

test('supplyRunCredentials rejects an unknown provider and an unknown run', async () => {
  const id = await h.startRun(ALICE_SECRET, GREETER, { name: 'x', place: 'y' });
  const bad = await h.gql(SUPPLY, { id, c: [{ provider: 'acme', apiKey: 'k' }] });
  assert.equal(errorCodes(bad), ['BAD_USER_INPUT']);
  const unknown = await h.gql(SUPPLY, { id: '00000000-0000-4000-8000-000000000000', c: [{ provider: 'openai', apiKey: 'k' }] });
  assert.equal(errorCodes(unknown), ['NOT_FOUND']);
});

test('mutations cannot be sent with GET', async () => {
  const url = `${h.url}/graphql?query=${encodeURIComponent('mutation { cancelRun(id: "x") { id } }')}`;
  const res = await fetch(url, { headers: { Authorization: `Bearer test-internal-token-123456`, 'apollo-require-preflight': 'true' } });
  assert.is(res.status, 405);
});

test.run();
