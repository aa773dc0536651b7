import { suite, test } from 'uvu';
import * as assert from 'uvu/assert';
import { ApiError } from '../../src/domain/errors.ts';
import { SlidingWindowLimiter } from '../../src/runs/rate-limiter.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';

test('the window slides by the second: a hit leaves 60 s after the start of its second', async () => {
  const l = new SlidingWindowLimiter();
  const t0 = 1_000_000;
  assert.is((await l.hit('k', 2, t0)).remaining, 1);
  assert.is((await l.hit('k', 2, t0 + 30_000)).remaining, 0);
  try {
    await l.hit('k', 2, t0 + 59_999);
    assert.unreachable('third hit inside the window');
  } catch (e) {
    assert.instance(e, ApiError);
    assert.is((e as ApiError).code, 'rate_limited');
    assert.is((e as ApiError).facts.retryAfterSeconds, 1);
  }
  // The refused hit did not count: at t0+60s the first hit has left and one slot is free.
  assert.is((await l.hit('k', 2, t0 + 60_000)).remaining, 0);
  await l.hit('k', 2, t0 + 60_001).then(
    () => assert.unreachable('a full window refuses'),
    (e: unknown) => assert.is((e as ApiError).code, 'rate_limited'),
  );
  assert.is((await l.hit('other', 2, t0 + 60_001)).remaining, 1);
});

test('a hit late in its second leaves with its second, and a huge limit keeps 60 buckets', async () => {
  const l = new SlidingWindowLimiter();
  const t0 = 2_000_000;
  assert.equal(await l.hit('k', 1, t0 + 900), { limit: 1, remaining: 0, resetSeconds: 60 });
  const refused = await l.hit('k', 1, t0 + 59_500).catch((e: ApiError) => e);
  assert.is((refused as ApiError).facts.retryAfterSeconds, 1);
  assert.is((await l.hit('k', 1, t0 + 60_000)).remaining, 0);
  // A hit per millisecond for 70 s: at most `limit` counted in any 60 one-second buckets.
  const many = new SlidingWindowLimiter();
  let counted = 0;
  for (let ms = 0; ms < 70_000; ms++) counted += await many.hit('k', 1_000_000, t0 + ms).then(() => 1);
  assert.is(counted, 70_000);
  assert.is((await many.hit('k', 1_000_000, t0 + 70_000)).remaining, 1_000_000 - 59_001);
});

const t = suite<{ t: TestApp }>('rate limit over HTTP');
t.before(async (ctx) => {
  ctx.t = await startTestApp();
});
t.after(async (ctx) => ctx.t.close());

t('POST /runs is limited per key, invalid requests count, 429s do not, other routes never', async ({ t }) => {
  const key = 'wr_test_bob_slow'; // 3 per minute
  const a = await t.call('POST', '/runs', { key, body: { workflow: 'aaaaaaaa-0000-4000-8000-000000000001', inputs: { topic: 'x' } } });
  assert.is(a.status, 202);
  assert.is(a.headers.get('ratelimit-limit'), '3');
  assert.is(a.headers.get('ratelimit-remaining'), '2');
  const b = await t.call('POST', '/runs', { key, rawBody: '{bad', headers: { 'content-type': 'application/json' } });
  assert.is(b.status, 400);
  assert.is(b.headers.get('ratelimit-remaining'), '1');
  const c = await t.call('POST', '/runs', { key, body: { workflow: 'aaaaaaaa-0000-4000-8000-000000000001', inputs: {} } });
  assert.is(c.status, 400);
  assert.is(c.headers.get('ratelimit-remaining'), '0');
  const before = Number((await t.deps.orm.em.fork().execute<any[]>('select count(*)::int as n from runs'))[0].n);
  const d = await t.call('POST', '/runs', { key, body: { workflow: 'aaaaaaaa-0000-4000-8000-000000000001', inputs: { topic: 'x' } } });
  assert.is(d.status, 429);
  assert.is(d.body.error.code, 'rate_limited');
  assert.ok(Number(d.headers.get('retry-after')) >= 1);
  assert.is(Number((await t.deps.orm.em.fork().execute<any[]>('select count(*)::int as n from runs'))[0].n), before);
  for (let i = 0; i < 5; i++) assert.is((await t.call('GET', '/runs', { key })).status, 200);
  // A full window answers 429 whatever else is wrong with the request, and counts none of it.
  const e = await t.call('POST', '/runs', { key, rawBody: '{bad', headers: { 'content-type': 'application/json' } });
  assert.is(e.status, 429);
  assert.is(e.headers.get('ratelimit-remaining'), '0');
  const f = await t.call('POST', '/runs', {
    key,
    body: { workflow: 'aaaaaaaa-0000-4000-8000-000000000001', inputs: { topic: 'x' } },
    headers: { 'idempotency-key': 'refused-by-the-limit' },
  });
  assert.is(f.status, 429);
  const records = await t.deps.orm.em.fork().execute<any[]>(`select count(*)::int as n from idempotency_records where key = 'refused-by-the-limit'`);
  assert.is(Number(records[0].n), 0, 'a refused request claims no idempotency key');
  // Refused by the document's parameter rules (a header too long, an unknown query parameter), it is still the window's 429.
  const valid = { workflow: 'aaaaaaaa-0000-4000-8000-000000000001', inputs: { topic: 'x' } };
  for (const [path, headers] of [
    ['/runs', { 'idempotency-key': 'k'.repeat(300) }],
    ['/runs?unknown=1', {}],
  ] as const) {
    const refused = await t.call('POST', path, { key, body: valid, headers });
    assert.is(refused.status, 429, `${path} ${JSON.stringify(refused.body)}`);
    assert.is(refused.headers.get('ratelimit-remaining'), '0');
  }
  // Unauthenticated attempts never reach the limiter and another key is unaffected.
  assert.is(
    (await t.call('POST', '/runs', { key: 'wr_test_bob', body: { workflow: 'aaaaaaaa-0000-4000-8000-000000000001', inputs: { topic: 'y' } } })).status,
    202,
  );
});

test.run();
t.run();
