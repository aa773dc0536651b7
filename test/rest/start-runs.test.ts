import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { hashApiKey } from '../../src/security/crypto.ts';

/** POST /runs/batch (docs/design/batch-runs.md): every item through POST /runs's one check and one acceptance. */

const W_SUMMARY = 'aaaaaaaa-0000-4000-8000-000000000001';
const W_TYPED = 'aaaaaaaa-0000-4000-8000-000000000002';
const W_NOAPI = 'aaaaaaaa-0000-4000-8000-000000000005';

const t = suite<{ t: TestApp }>('POST /runs/batch');
t.before(async (ctx) => {
  ctx.t = await startTestApp();
});
t.after(async (ctx) => ctx.t.close());

const sql = <T = any>(t: TestApp, text: string, params: unknown[] = []) => t.deps.orm.em.fork().execute<T[]>(text, params);
const runCount = async (t: TestApp) => Number((await sql(t, 'select count(*)::int as n from runs'))[0].n);
const batch = (t: TestApp, runs: unknown[], opts: { key?: string; headers?: Record<string, string> } = {}) =>
  t.call('POST', '/runs/batch', { key: opts.key, body: { runs }, headers: opts.headers });
const summary = (topic: string, extra: Record<string, unknown> = {}) => ({ workflow: W_SUMMARY, inputs: { topic }, ...extra });

t('a batch is answered 202 item by item in request order; the runs are queued in index order', async ({ t }) => {
  const res = await batch(t, [summary('a'), summary('b', { metadata: { n: '1' } }), summary('c')], { headers: { 'cancel-after': '5m' } });
  assert.is(res.status, 202);
  assert.equal(Object.keys(res.body).sort(), ['accepted', 'items', 'refused']);
  assert.is(res.body.accepted, 3);
  assert.is(res.body.refused, 0);
  assert.equal(
    res.body.items.map((i: any) => i.index),
    [0, 1, 2],
  );
  assert.ok(res.headers.get('ratelimit-limit'));
  const ids = res.body.items.map((i: any) => i.run.id);
  for (const i of res.body.items) assert.is(i.run.statusUrl, `${t.publicBase}/runs/${i.run.id}`);
  const rows = await sql(t, 'select id, inputs, metadata, deadline is not null as deadline from runs where id in (?) order by created_at, id', [ids]);
  assert.equal(
    rows.map((r) => r.id),
    ids,
  );
  assert.equal(
    rows.map((r) => r.inputs.topic),
    ['a', 'b', 'c'],
  );
  assert.equal(rows[1].metadata, { n: '1' });
  assert.ok(rows.every((r) => r.deadline));
});

t('item 500 with bad inputs is the only one refused, with exactly the error POST /runs answers for it', async ({ t }) => {
  const bad = { workflow: W_SUMMARY, inputs: { topic: 'x', colour: 'red' } };
  const runs = Array.from({ length: 600 }, (_, i) => (i === 500 ? bad : summary(`t${i}`)));
  const before = await runCount(t);
  const res = await batch(t, runs);
  assert.is(res.status, 202);
  assert.is(res.body.accepted, 599);
  assert.is(res.body.refused, 1);
  const refused = res.body.items.filter((i: any) => i.error);
  assert.is(refused.length, 1);
  assert.is(refused[0].index, 500);
  const single = await t.call('POST', '/runs', { body: bad });
  assert.is(single.status, 400);
  assert.equal(refused[0].error, single.body.error);
  assert.is(await runCount(t), before + 599);
});

t('every kind of item refusal is POST /runs', async ({ t }) => {
  const items: unknown[] = [
    'not an object',
    {},
    { workflow: 'nope' },
    { workflow: W_NOAPI },
    { workflow: W_TYPED, inputs: { n: '1' } },
    { workflow: W_SUMMARY, inputs: { topic: 'x' }, metadata: { '': 'x' } },
    { workflow: W_SUMMARY, inputs: { topic: 'x' }, version: 5 },
    { workflow: W_SUMMARY, inputs: { topic: 'x' }, idempotencyKey: '' },
    summary('fine'),
  ];
  const res = await batch(t, items);
  assert.is(res.status, 202);
  assert.is(res.body.accepted, 1);
  for (const [i, body] of items.entries()) {
    if (i === items.length - 1) continue;
    const single = await t.call('POST', '/runs', { body });
    assert.ok(single.status >= 400, JSON.stringify(body));
    assert.equal(res.body.items[i], { index: i, error: single.body.error }, JSON.stringify(body));
  }
});

t('the whole request fails only for what concerns it', async ({ t }) => {
  const cases: [unknown, number, string][] = [
    [{ runs: [] }, 400, 'invalid_request'],
    [{ runs: {} }, 400, 'invalid_request'],
    [[summary('x')], 400, 'invalid_request'],
    [{ runs: Array.from({ length: 1001 }, () => summary('x')) }, 400, 'invalid_request'],
  ];
  const before = await runCount(t);
  for (const [body, status, code] of cases) {
    const res = await t.call('POST', '/runs/batch', { body });
    assert.is(res.status, status, JSON.stringify(body).slice(0, 80));
    assert.is(res.body.error.code, code);
    assert.ok(res.headers.get('ratelimit-limit'), 'counted in the window');
  }
  const json = await t.call('POST', '/runs/batch', { rawBody: '{"runs": [', headers: { 'content-type': 'application/json' } });
  assert.is(json.status, 400);
  assert.is(json.body.error.code, 'invalid_json');
  const media = await t.call('POST', '/runs/batch', { rawBody: '{}', headers: { 'content-type': 'text/plain' } });
  assert.is(media.status, 415);
  const scope = await t.call('POST', '/runs/batch', { key: 'wr_test_bob_read', body: { runs: [summary('x')] } });
  assert.is(scope.status, 403);
  assert.is(scope.body.error.code, 'insufficient_scope');
  const header = await t.call('POST', '/runs/batch', { body: { runs: [summary('x')] }, headers: { 'cancel-after': '0s' } });
  assert.is(header.status, 400);
  assert.is(await runCount(t), before);
});

t('a key repeated inside one batch is one run; another request under it is a conflict for the later item', async ({ t }) => {
  const res = await batch(t, [
    summary('k', { idempotencyKey: 'in-batch-1' }),
    summary('k', { idempotencyKey: 'in-batch-1' }),
    summary('other', { idempotencyKey: 'in-batch-1' }),
    summary('k', { idempotencyKey: 'in-batch-2' }),
  ]);
  assert.is(res.status, 202);
  const [a, b, c, d] = res.body.items;
  assert.is(a.run.id, b.run.id);
  assert.is(c.error.code, 'idempotency_conflict');
  assert.ok(d.run.id !== a.run.id);
  // And across requests: a single POST with the key answers the batch's run.
  const single = await t.call('POST', '/runs', { body: summary('k'), headers: { 'idempotency-key': 'in-batch-1' } });
  assert.is(single.status, 202);
  assert.is(single.body.run.id, a.run.id);
});

t('the batch Idempotency-Key: the same body answers the same runs and creates nothing; another body is 409', async ({ t }) => {
  const runs = [summary('i1'), summary('i2', { idempotencyKey: 'own-key-in-keyed-batch' }), { workflow: W_NOAPI }];
  const first = await batch(t, runs, { headers: { 'idempotency-key': 'batch-key-1' } });
  assert.is(first.status, 202);
  assert.is(first.body.accepted, 2);
  const before = await runCount(t);
  const again = await batch(t, runs, { headers: { 'idempotency-key': 'batch-key-1' } });
  assert.is(again.status, 202);
  assert.equal(again.body, first.body);
  assert.is(await runCount(t), before);
  const other = await batch(t, [summary('i1'), summary('changed')], { headers: { 'idempotency-key': 'batch-key-1' } });
  assert.is(other.status, 409);
  assert.is(other.body.error.code, 'idempotency_conflict');
  assert.is(await runCount(t), before);
  // Another key is another batch.
  const fresh = await batch(t, [summary('i1')], { headers: { 'idempotency-key': 'batch-key-2' } });
  assert.ok(fresh.body.items[0].run.id !== first.body.items[0].run.id);
});

t('two bodies raced under one batch key: the key decides the whole batch, the other is 409 and writes nothing', async ({ t }) => {
  const key = 'raced-batch-key';
  const short = [summary('short-0'), summary('short-1')];
  const long = [summary('long-0'), summary('long-1'), summary('long-2'), summary('long-3'), summary('long-4')];
  const before = await runCount(t);
  const answers = await Promise.all([short, long].map((runs) => batch(t, runs, { headers: { 'idempotency-key': key } })));
  assert.equal(answers.map((a) => a.status).sort(), [202, 409], answers.map((a) => a.text).join('\n'));
  const won = answers.findIndex((a) => a.status === 202);
  const winner = [short, long][won]!;
  assert.is(answers[1 - won]!.body.error.code, 'idempotency_conflict');
  assert.is(await runCount(t), before + winner.length, "only the winner's items are written");
  const topics = await sql(t, "select inputs->>'topic' as topic from runs where inputs->>'topic' like 'short-%' or inputs->>'topic' like 'long-%'");
  assert.equal(topics.map((r) => r.topic).sort(), winner.map((r) => r.inputs.topic).sort());
});

t('the spend cap is taken in index order: items past it are refused spend_cap_reached, never overspent', async ({ t }) => {
  const capped = 'wr_test_bob_capped'; // $0.50 a day
  await sql(t, `delete from purchases where account_id = (select id from accounts where handle = 'bob') and workflow_id = ?`, [W_SUMMARY]);
  await sql(t, 'update workflows set price_usd = 0.2 where id = ?', [W_SUMMARY]);
  const res = await batch(t, [summary('c0'), summary('c1'), summary('c2'), { workflow: W_SUMMARY }, summary('c4')], { key: capped });
  assert.is(res.status, 202);
  assert.equal(
    res.body.items.map((i: any) => i.error?.code ?? 'run'),
    ['run', 'run', 'spend_cap_reached', 'invalid_inputs', 'spend_cap_reached'],
  );
  const single = await t.call('POST', '/runs', { key: capped, body: summary('c5') });
  assert.is(single.status, 402);
  assert.is(res.body.items[2].error.message, single.body.error.message);
});

t('?dryRun=true quotes each item (price, funding) or refuses it, totals, names the items past the spend cap, and writes nothing', async ({ t }) => {
  const capped = 'wr_test_bob_capped'; // the earlier test's two runs reserved $0.40 and some step fees of it
  await sql(t, 'update api_keys set spend_cap_usd = 1 where key_hash = ?', [hashApiKey(capped)]);
  await new Promise((r) => setTimeout(r, 1100)); // the key as authenticated is kept a second
  const before = await runCount(t);
  const [records] = await sql(t, 'select count(*)::int as n from idempotency_records');
  const runs = [summary('q0'), { workflow: W_NOAPI }, summary('q2'), summary('q3')];
  const res = await t.call('POST', '/runs/batch?dryRun=true', { key: capped, body: { runs }, headers: { 'idempotency-key': 'dry-run-key' } });
  assert.is(res.status, 200);
  const [q0, noapi, q2, q3] = res.body.items;
  assert.equal(Object.keys(q0.quote).sort(), ['funding', 'priceUsd', 'version', 'workflow']);
  assert.is(q0.quote.funding, 'wallet');
  assert.is(q0.quote.workflow, W_SUMMARY);
  assert.ok(q0.quote.priceUsd > 0.2 && q0.quote.priceUsd < 0.21, String(q0.quote.priceUsd));
  assert.is(noapi.error.code, 'forbidden');
  assert.equal(q2.quote, q0.quote);
  assert.is(q3.error.code, 'spend_cap_reached');
  assert.equal(res.body.overSpendCap, [3]);
  assert.is(res.body.totalUsd, Number((q0.quote.priceUsd * 2).toFixed(6)));
  assert.is(res.body.accepted, 2);
  assert.is(await runCount(t), before);
  assert.is(Number((await sql(t, 'select count(*)::int as n from idempotency_records'))[0].n), Number(records.n));
  // The real batch then does what the quote said.
  const real = await batch(t, runs, { key: capped });
  assert.equal(
    real.body.items.map((i: any) => i.error?.code ?? 'run'),
    ['run', 'forbidden', 'run', 'spend_cap_reached'],
  );
});

t("the items draw on the key's run budget: a batch it cannot hold is refused whole with 429, nothing written", async ({ t }) => {
  const key = 'wr_test_bob_exec';
  await sql(t, 'update api_keys set run_budget_per_minute = 5 where key_hash = ?', [hashApiKey(key)]);
  // The key as authenticated is kept a second.
  await new Promise((r) => setTimeout(r, 1100));
  const first = await batch(t, [summary('b1'), summary('b2'), summary('b3')], { key });
  assert.is(first.status, 202);
  assert.is(first.headers.get('ratelimit-policy'), '"requests";q=60;w=60, "runs";q=5;w=60');
  assert.match(first.headers.get('ratelimit') ?? '', /"runs";r=2;t=\d+$/);
  const before = await runCount(t);
  const over = await batch(t, [summary('b4'), summary('b5'), summary('b6')], { key });
  assert.is(over.status, 429);
  assert.is(over.body.error.code, 'rate_limited');
  assert.match(over.body.error.message, /run budget of 5/);
  assert.ok(Number(over.headers.get('retry-after')) >= 1);
  assert.is(over.headers.get('ratelimit-limit'), '60', 'the request window, in which the batch counted');
  assert.is(await runCount(t), before);
  const fits = await batch(t, [summary('b4'), summary('b5')], { key });
  assert.is(fits.status, 202);
  assert.is(fits.body.accepted, 2);
  // A single POST is one request: the budget is the batches'.
  assert.is((await t.call('POST', '/runs', { key, body: summary('single') })).status, 202);
});

t("a batch is one request in the key's request window", async ({ t }) => {
  const key = 'wr_test_bob_slow'; // 3 requests a minute
  for (let i = 0; i < 3; i++) {
    const res = await batch(t, [summary('s1'), summary('s2'), summary('s3'), summary('s4')], { key });
    assert.is(res.status, 202);
    assert.is(res.headers.get('ratelimit-remaining'), String(2 - i));
  }
  const before = await runCount(t);
  const refused = await batch(t, [summary('s5')], { key });
  assert.is(refused.status, 429);
  assert.is(await runCount(t), before);
  // Whatever else is wrong with it.
  assert.is((await t.call('POST', '/runs/batch', { key, body: { runs: [] } })).status, 429);
});

t.run();
