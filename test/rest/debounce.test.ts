import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from '../helpers/app.ts';

/**
 * Debounce over REST (docs/design/flow-control.md#debounce): the first call of a key is a run scheduled
 * `delay` later; each call while it waits joins it (200, `Debounced: true`, the run with the call's inputs
 * and metadata), moving its start, never past `maxDelay` after the first call. The engine drives nothing
 * here (NullEngine); the start itself is held by test/engine/debounce.test.ts.
 */

const W_SUMMARY = 'aaaaaaaa-0000-4000-8000-000000000001';

const t = suite<{ t: TestApp }>('debounce');
t.before(async (ctx) => {
  ctx.t = await startTestApp();
});
t.after(async (ctx) => ctx.t.close());

const sql = <T = any>(t: TestApp, text: string, params: unknown[] = []) => t.deps.orm.em.fork().execute<T[]>(text, params);
const call = (t: TestApp, topic: string, debounce: unknown, extra: Record<string, unknown> = {}, key?: string) =>
  t.call('POST', '/runs', { key, body: { workflow: W_SUMMARY, inputs: { topic }, debounce, ...extra } });

t('the first call schedules a run; the next ones join it: 200, Debounced, its inputs and metadata replaced, its start moved', async ({ t }) => {
  const d = { key: 'doc-1', delay: '10m', maxDelay: '1h' };
  const first = await call(t, 'one', d, { metadata: { rev: '1' } });
  assert.is(first.status, 202);
  assert.is(first.headers.get('debounced'), null);
  const id = first.body.run.id;
  const before = (await t.call('GET', `/runs/${id}`)).body;
  assert.is(before.queue, null);
  const second = await call(t, 'two', d, { metadata: { rev: '2' } });
  assert.is(second.status, 200);
  assert.is(second.headers.get('debounced'), 'true');
  assert.is(second.body.id, id);
  assert.equal(second.body.metadata, { rev: '2' });
  assert.ok(Date.parse(second.body.scheduledFor) >= Date.parse(before.scheduledFor));
  const [row] = await sql(t, 'select inputs, cap_usd, displayed_price_usd from runs where id = ?', [id]);
  assert.is(row.inputs.topic, 'two');
  assert.is(String(row.cap_usd), String(row.displayed_price_usd), "one reservation, the run's price");
  // The metadata filter follows the replaced labels.
  const now = await t.call('GET', '/runs?metadata[rev]=2');
  assert.equal(
    now.body.runs.map((r: any) => r.id),
    [id],
  );
  const old = await t.call('GET', '/runs?metadata[rev]=1');
  assert.equal(old.body.runs, []);
  // Another key is another burst.
  const other = await call(t, 'x', { ...d, key: 'doc-2' });
  assert.is(other.status, 202);
  assert.ok(other.body.run.id !== id);
});

t('the start never passes maxDelay after the first call', async ({ t }) => {
  const d = { key: 'capped', delay: '1h', maxDelay: '1h' };
  const first = await call(t, 'a', d);
  const [{ until }] = await sql(t, 'select (extract(epoch from debounce_until) * 1000)::float8 as until from runs where id = ?', [first.body.run.id]);
  await new Promise((r) => setTimeout(r, 50));
  const second = await call(t, 'b', d);
  assert.is(second.status, 200);
  assert.is(Date.parse(second.body.scheduledFor), Math.round(Number(until)), 'held at the first call plus maxDelay');
});

t('concurrent first calls make one run, so a capped key reserves one price for the whole burst', async ({ t }) => {
  const d = { key: 'burst', delay: '10m', maxDelay: '1h' };
  // wr_test_bob_capped: a daily cap of $0.50, two runs of this workflow.
  const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => call(t, `t${i}`, d, {}, 'wr_test_bob_capped')));
  const statuses = answers.map((a) => a.status).sort();
  assert.equal(statuses, [200, 200, 200, 200, 200, 200, 200, 202]);
  const ids = new Set(answers.map((a) => (a.status === 202 ? a.body.run.id : a.body.id)));
  assert.is(ids.size, 1);
  const [{ n, reserved, price }] = await sql(
    t,
    `select count(*)::int as n, sum(cap_usd)::text as reserved, max(displayed_price_usd)::text as price from runs where debounce_key = 'burst'`,
  );
  assert.is(n, 1);
  assert.is(reserved, price);
});

t("a joining call seals its password input again: the run keeps only the last call's secret", async ({ t }) => {
  const W_TYPED = 'aaaaaaaa-0000-4000-8000-000000000002';
  const debounce = { key: 'typed', delay: '10m', maxDelay: '1h' };
  const send = (token: string) => t.call('POST', '/runs', { body: { workflow: W_TYPED, inputs: { n: 1, token }, debounce } });
  const first = await send('secret-one');
  const second = await send('secret-two');
  assert.is(second.status, 200);
  const secrets = await sql(t, `select name, ciphertext from run_secrets where run_id = ? and kind = 'password_input'`, [first.body.run.id]);
  assert.equal(
    secrets.map((r) => r.name),
    ['token'],
  );
  assert.is(t.deps.sealer.open(secrets[0].ciphertext), 'secret-two');
  const [row] = await sql(t, 'select inputs from runs where id = ?', [first.body.run.id]);
  assert.is(row.inputs.token, null, 'the stored inputs never hold the password');
});

t('refused with 400 invalid_request: malformed debounce, maxDelay below delay, over 7 days, with a delayed start', async ({ t }) => {
  const bad: [unknown, Record<string, unknown>][] = [
    ['x', {}],
    [{ key: 'k', delay: '5s' }, {}],
    [{ key: '', delay: '5s', maxDelay: '10s' }, {}],
    [{ key: 'k'.repeat(129), delay: '5s', maxDelay: '10s' }, {}],
    [{ key: 'k', delay: '10s', maxDelay: '5s' }, {}],
    [{ key: 'k', delay: '5s', maxDelay: '8d' }, {}],
    [{ key: 'k', delay: 'soon', maxDelay: '10s' }, {}],
    [{ key: 'k', delay: '5s', maxDelay: '10s', leading: true }, {}],
    [{ key: 'k', delay: '5s', maxDelay: '10s' }, { startAt: new Date(Date.now() + 60_000).toISOString() }],
  ];
  for (const [debounce, extra] of bad) {
    const res = await call(t, 'v', debounce, extra);
    assert.is(res.status, 400, JSON.stringify(debounce));
    assert.is(res.body.error.code, 'invalid_request');
  }
  const header = await t.call('POST', '/runs', {
    body: { workflow: W_SUMMARY, inputs: { topic: 'h' }, debounce: { key: 'k', delay: '5s', maxDelay: '10s' } },
    headers: { 'start-after': '1m' },
  });
  assert.is(header.status, 400);
});

t('a batch item takes debounce: items of one key in one batch are one run', async ({ t }) => {
  const d = { key: 'batch-doc', delay: '10m', maxDelay: '1h' };
  const item = (topic: string) => ({ workflow: W_SUMMARY, inputs: { topic }, debounce: d });
  const res = await t.call('POST', '/runs/batch', { body: { runs: [item('a'), item('b'), { workflow: W_SUMMARY, inputs: { topic: 'c' } }] } });
  assert.is(res.status, 202);
  const [a, b, c] = res.body.items;
  assert.is(a.run.id, b.run.id);
  assert.ok(c.run.id !== a.run.id);
  const [row] = await sql(t, 'select inputs from runs where id = ?', [a.run.id]);
  assert.is(row.inputs.topic, 'b');
});

t.run();
