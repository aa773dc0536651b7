import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from '../helpers/app.ts';

const W_SUMMARY = 'aaaaaaaa-0000-4000-8000-000000000001';
const W_TYPED = 'aaaaaaaa-0000-4000-8000-000000000002';
const W_LEGACY = 'aaaaaaaa-0000-4000-8000-000000000003';
const W_HIDDEN = 'aaaaaaaa-0000-4000-8000-000000000004';
const W_PAUSED = 'aaaaaaaa-0000-4000-8000-000000000006';
const V1 = 'aaaaaaaa-0000-4000-8000-0000000000a1';
const V2 = 'aaaaaaaa-0000-4000-8000-0000000000a2';

const t = suite<{ t: TestApp }>('workflows');
t.before(async (ctx) => {
  ctx.t = await startTestApp();
});
t.after(async (ctx) => ctx.t.close());

t('the catalog lists public, owned and purchased workflows ordered by name, hiding others’ unlisted ones', async ({ t }) => {
  const res = await t.call('GET', '/workflows');
  assert.is(res.status, 200);
  const names = res.body.workflows.map((w: any) => w.name);
  assert.equal(names, [...names].sort());
  assert.ok(names.includes('Summarize article'));
  assert.ok(!names.includes('Hidden draft'));
  assert.ok(!names.includes('No API please') || res.body.workflows.find((w: any) => w.name === 'No API please').apiRunnableNow === false);
  assert.equal(res.body.pagination, { offset: 0, limit: 20, hasMore: false });
  const own = await t.call('GET', '/workflows', { key: 'wr_test_alice' });
  assert.ok(own.body.workflows.some((w: any) => w.name === 'Hidden draft'));
});

t('each list row carries every WorkflowListItem field with per-caller access and price', async ({ t }) => {
  const bob = (await t.call('GET', '/workflows')).body.workflows;
  const summary = bob.find((w: any) => w.id === W_SUMMARY);
  // bob is pinned to v1 (1 step) by a purchase: compute only.
  assert.is(summary.userAccess, 'purchased');
  assert.is(summary.displayedRunPriceUsd, 0.0001);
  assert.is(summary.runsCount, 0);
  assert.equal(summary.requiredProviders, []);
  const carol = (await t.call('GET', '/workflows', { key: 'wr_test_carol' })).body.workflows.find((w: any) => w.id === W_SUMMARY);
  // a wallet caller pays the creator price plus two steps of v2.
  assert.is(carol.userAccess, 'wallet');
  assert.is(carol.displayedRunPriceUsd, 0.2502);
  assert.type(carol.pricingExplanation, 'string');
  const legacy = bob.find((w: any) => w.id === W_LEGACY);
  assert.is(legacy.userAccess, 'purchase_required');
  assert.is(legacy.apiRunnableNow, false);
  assert.is(legacy.displayedRunPriceUsd, 1.0001);
  const paused = bob.find((w: any) => w.id === W_PAUSED);
  assert.is(paused.apiRunnableNow, false);
  const owned = (await t.call('GET', '/workflows', { key: 'wr_test_alice' })).body.workflows.find((w: any) => w.id === W_SUMMARY);
  assert.is(owned.userAccess, 'owned');
  assert.is(owned.displayedRunPriceUsd, 0.0002);
});

t('pagination pages through the catalog with hasMore and rejects out-of-range values', async ({ t }) => {
  const all = (await t.call('GET', '/workflows?limit=50')).body.workflows;
  const first = await t.call('GET', '/workflows?limit=2');
  assert.is(first.body.workflows.length, 2);
  assert.equal(first.body.pagination, { offset: 0, limit: 2, hasMore: true });
  const last = await t.call('GET', `/workflows?limit=2&offset=${all.length - 1}`);
  assert.is(last.body.workflows.length, 1);
  assert.is(last.body.pagination.hasMore, false);
  for (const q of ['limit=0', 'limit=51', 'limit=abc', 'offset=-1', 'offset=1.5', 'runModel=paid', 'access=everyone', 'color=red']) {
    const bad = await t.call('GET', `/workflows?${q}`);
    assert.is(bad.status, 400, q);
    assert.is(bad.body.error.code, 'invalid_request', q);
  }
});

t('filters narrow the list by text, run model and access', async ({ t }) => {
  const q = (await t.call('GET', '/workflows?q=SUMMAR')).body.workflows;
  assert.equal(
    q.map((w: any) => w.id),
    [W_SUMMARY],
  );
  const free = (await t.call('GET', '/workflows?runModel=free')).body.workflows;
  assert.ok(free.length > 0 && free.every((w: any) => w.runModel === 'free'));
  const purchased = (await t.call('GET', '/workflows?access=purchased')).body.workflows;
  assert.equal(
    purchased.map((w: any) => w.id),
    [W_SUMMARY],
  );
  const wildcard = (await t.call('GET', '/workflows?q=%25')).body.workflows;
  assert.is(wildcard.length, 0);
});

t('a pinned buyer sees the pinned version, its input schema and that an update is available', async ({ t }) => {
  const res = await t.call('GET', `/workflows/${W_SUMMARY}`);
  assert.is(res.status, 200);
  const d = res.body;
  assert.is(d.versionId, V1);
  assert.is(d.versionLabel, 'v1');
  assert.is(d.pinnedVersionId, V1);
  assert.is(d.activeVersionId, V2);
  assert.is(d.updateAvailable, true);
  assert.is(d.inputCount, 1);
  assert.equal(d.inputSchema, [{ nodeId: 'topic', name: 'Topic', type: 'text', specId: 'input.text', required: true }]);
  assert.is(d.runsCount, undefined);
  assert.ok(d.purchaseUrl.startsWith('http://localhost:'));
  assert.is(d.responseShape.run.statusUrl.startsWith(t.publicBase + '/runs/'), true);
  assert.is(d.exampleRequest.method, 'POST');
  assert.is(d.exampleRequest.url, `${t.publicBase}/runs`);
  assert.is(d.exampleRequest.body.workflow, W_SUMMARY);
});

t('a wallet caller sees the active version with defaults and dropdown options', async ({ t }) => {
  const d = (await t.call('GET', `/workflows/${W_SUMMARY}`, { key: 'wr_test_carol' })).body;
  assert.is(d.versionId, V2);
  assert.is(d.pinnedVersionId, null);
  assert.is(d.updateAvailable, false);
  const tone = d.inputSchema.find((f: any) => f.nodeId === 'tone');
  assert.equal(tone.options, [
    { label: 'Formal', value: 'formal' },
    { label: 'Casual', value: 'casual' },
  ]);
  assert.is(tone.defaultValue, 'formal');
  const count = d.inputSchema.find((f: any) => f.nodeId === 'count');
  assert.is(count.type, 'number');
  assert.is(count.options, undefined);
});

t('unknown, malformed and invisible workflow ids all answer 404 not_found', async ({ t }) => {
  for (const id of ['aaaaaaaa-0000-4000-8000-00000000ffff', 'not-a-uuid', W_HIDDEN]) {
    const res = await t.call('GET', `/workflows/${id}`);
    assert.is(res.status, 404, id);
    assert.is(res.body.error.code, 'not_found');
    const v = await t.call('GET', `/workflows/${id}/versions`);
    assert.is(v.status, 404, id);
  }
});

t('owners list every version; buyers only the active one and their pin', async ({ t }) => {
  const owner = (await t.call('GET', `/workflows/${W_SUMMARY}/versions`, { key: 'wr_test_alice' })).body;
  assert.equal(owner.versions.map((v: any) => v.label).sort(), ['v1', 'v2']);
  const buyer = (await t.call('GET', `/workflows/${W_SUMMARY}/versions`)).body;
  assert.is(buyer.pinnedVersionId, V1);
  assert.equal(new Set(buyer.versions.map((v: any) => v.id)), new Set([V1, V2]));
  assert.ok(buyer.versions.find((v: any) => v.id === V1).isPinned);
  const wallet = (await t.call('GET', `/workflows/${W_TYPED}/versions`, { key: 'wr_test_carol' })).body;
  assert.is(wallet.versions.length, 1);
  assert.ok(wallet.versions[0].isActive);
});

t('accepting an update re-pins the buyer to the active version once', async ({ t }) => {
  const res = await t.call('POST', `/workflows/${W_SUMMARY}/accept-update`);
  assert.is(res.status, 200);
  assert.equal(res.body, { workflowId: W_SUMMARY, previousVersionId: V1, pinnedVersionId: V2, activeVersionId: V2, updateAvailable: false });
  const again = await t.call('POST', `/workflows/${W_SUMMARY}/accept-update`);
  assert.equal(again.body.previousVersionId, V2);
  const d = (await t.call('GET', `/workflows/${W_SUMMARY}`)).body;
  assert.is(d.versionId, V2);
  assert.is(d.updateAvailable, false);
  const noPurchase = await t.call('POST', `/workflows/${W_SUMMARY}/accept-update`, { key: 'wr_test_carol' });
  assert.is(noPurchase.status, 403);
  assert.is(noPurchase.body.error.code, 'forbidden');
  const readOnly = await t.call('POST', `/workflows/${W_SUMMARY}/accept-update`, { key: 'wr_test_bob_read' });
  assert.is(readOnly.status, 403);
  assert.is(readOnly.body.error.code, 'insufficient_scope');
});

t.run();
