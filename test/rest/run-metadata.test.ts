import { randomUUID } from 'node:crypto';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { readSse } from '../helpers/sse-frames.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.ts';

/** POST /runs `metadata` (docs/design/run-metadata.md): limits, every view of the run, the webhook, replays. */

const W_SUMMARY = 'aaaaaaaa-0000-4000-8000-000000000001';
const KEY = 'wr_test_pat';

const t = suite<{ t: TestApp; receiver: WebhookReceiver }>('POST /runs metadata');
t.before(async (ctx) => {
  ctx.receiver = await startWebhookReceiver();
  ctx.t = await startTestApp({ env: { WEBHOOK_ALLOW_INSECURE: '1', ALLOW_PRIVATE_NETWORK: '1' } });
  const em = ctx.t.deps.orm.em.fork();
  const [pat] = await em.execute<{ id: string }[]>(`select id from accounts where handle = 'pat'`);
  await em.execute(`insert into webhook_endpoints (id, account_id, url, secret_ciphertext, events, created_at) values (?, ?, ?, ?, null, now())`, [
    randomUUID(),
    pat!.id,
    ctx.receiver.url,
    ctx.t.deps.sealer.seal(`whsec_${Buffer.from('metadata-test-secret-0123456789').toString('base64')}`),
  ]);
});
t.after(async (ctx) => {
  await ctx.t.close();
  await ctx.receiver.close();
});

const start = (t: TestApp, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
  t.call('POST', '/runs', { key: KEY, body: { workflow: W_SUMMARY, inputs: { topic: 'owls' }, ...body }, headers });

t('metadata round-trips through GET /runs/{id}, the list row, the SSE snapshot and the webhook', async ({ t, receiver }) => {
  const metadata = { orderId: 'order-42', 'customer name': 'Ünïcode "quoted" \\ ✓', empty: '' };
  const accepted = await start(t, { metadata });
  assert.is(accepted.status, 202, accepted.text);
  const id = accepted.body.run.id;
  assert.equal(Object.keys(accepted.body.run).sort(), ['eventsUrl', 'id', 'status', 'statusUrl', 'streamUrl'], 'the 202 is unchanged');

  const run = await t.call('GET', `/runs/${id}`, { key: KEY });
  assert.equal(run.body.metadata, metadata);
  const list = await t.call('GET', '/runs', { key: KEY });
  assert.equal(list.body.runs.find((r: { id: string }) => r.id === id).metadata, metadata);

  const stream = readSse(`${t.base}/runs/${id}/stream`, { authorization: `Bearer ${KEY}` });
  await waitFor('the snapshot', () => stream.frames.length > 0);
  stream.close();
  assert.is(stream.frames[0]!.type, 'snapshot');
  assert.equal(stream.frames[0]!.data.metadata, metadata);

  assert.is((await t.call('POST', `/runs/${id}/cancel`, { key: KEY })).status, 200);
  await waitFor('the run.cancelled webhook', () => receiver.bodies.some((b) => JSON.parse(b).data.id === id));
  const hook = JSON.parse(receiver.bodies.find((b) => JSON.parse(b).data.id === id)!);
  assert.is(hook.type, 'run.cancelled');
  assert.equal(hook.data.metadata, metadata);
  assert.equal(hook.data, (await t.call('GET', `/runs/${id}`, { key: KEY })).body, 'the webhook data is the run as GET shows it');
});

t('a run sent without metadata shows {}', async ({ t }) => {
  const id = (await start(t, {})).body.run.id;
  assert.equal((await t.call('GET', `/runs/${id}`, { key: KEY })).body.metadata, {});
});

t('metadata beyond its limits is 400 invalid_request naming the offending key, and writes nothing', async ({ t }) => {
  const count = async () => Number((await t.deps.orm.em.fork().execute<{ n: number }[]>('select count(*)::int as n from runs'))[0]!.n);
  const before = await count();
  const sixteen = Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`k${i}`, 'v']));
  const cases: [unknown, RegExp][] = [
    [{ ...sixteen, k16: 'v' }, /"k16".*at most 16/],
    [{ ['x'.repeat(65)]: 'v' }, new RegExp(`"${'x'.repeat(65)}" is longer than 64 characters`)],
    [{ note: 'v'.repeat(513) }, /"note" is longer than 512 characters/],
    [{ count: 3 }, /"count" must have a string value/],
    [{ nested: { a: 'b' } }, /"nested" must have a string value/],
    [{ gone: null }, /"gone" must have a string value/],
    [{ '': 'v' }, /keys must not be empty/],
    [['a'], /must be an object/],
    ['text', /must be an object/],
    [null, /must be an object/],
  ];
  for (const [metadata, message] of cases) {
    const res = await start(t, { metadata });
    assert.is(res.status, 400, JSON.stringify(metadata).slice(0, 80));
    assert.is(res.body.error.code, 'invalid_request');
    assert.match(res.body.error.message, message);
  }
  // The limits themselves are allowed: 16 keys, a 64-character key, a 512-character value (code points).
  const edge = { ...Object.fromEntries(Object.entries(sixteen).slice(2)), ['é'.repeat(64)]: 'v', long: '😀'.repeat(512) };
  const ok = await start(t, { metadata: edge });
  assert.is(ok.status, 202, ok.text);
  assert.equal((await t.call('GET', `/runs/${ok.body.run.id}`, { key: KEY })).body.metadata, edge);
  assert.is(await count(), before + 1);
});

t('metadata is not part of the idempotency fingerprint: a replay answers the original run with its first metadata', async ({ t }) => {
  const key = `meta-${randomUUID()}`;
  const first = await start(t, { metadata: { attempt: '1' } }, { 'Idempotency-Key': key });
  assert.is(first.status, 202);
  const again = await start(t, { metadata: { attempt: '2', extra: 'x' } }, { 'Idempotency-Key': key });
  assert.is(again.status, 202);
  assert.is(again.headers.get('idempotent-replayed'), 'true');
  assert.is(again.body.run.id, first.body.run.id);
  assert.equal((await t.call('GET', `/runs/${first.body.run.id}`, { key: KEY })).body.metadata, { attempt: '1' });
  // The fingerprint still covers the inputs.
  const other = await t.call('POST', '/runs', { key: KEY, body: { workflow: W_SUMMARY, inputs: { topic: 'bees' } }, headers: { 'Idempotency-Key': key } });
  assert.is(other.status, 409);
});

t('Cancel-After: the values the document states are taken and shown as the deadline; anything else is 400 invalid_request saying why', async ({ t }) => {
  for (const [header, seconds] of [
    ['30s', 30],
    ['86400s', 86400],
    ['1440m', 86400],
    ['24h', 86400],
    ['1h', 3600],
  ] as const) {
    const sent = Date.now();
    const res = await start(t, {}, { 'Cancel-After': header });
    assert.is(res.status, 202, `${header}: ${res.text}`);
    const run = (await t.call('GET', `/runs/${res.body.run.id}`, { key: KEY })).body;
    const after = (Date.parse(run.deadline) - sent) / 1000;
    assert.ok(after >= seconds - 1 && after < seconds + 5, `${header}: deadline ${run.deadline}, sent ${new Date(sent).toISOString()}`);
  }
  const malformed = /Cancel-After must be a duration such as 30s, 5m or 1h/;
  const tooLong = /Cancel-After must be at most 24 hours/;
  for (const [header, message] of [
    ['', malformed],
    ['0s', malformed],
    ['05m', malformed],
    ['30', malformed],
    ['1.5h', malformed],
    ['5 m', malformed],
    ['5M', malformed],
    ['25h', tooLong],
    ['1441m', tooLong],
    ['86401s', tooLong],
    ['999999h', tooLong],
  ] as const) {
    const res = await start(t, {}, { 'Cancel-After': header });
    assert.is(res.status, 400, `${JSON.stringify(header)}: ${res.text}`);
    assert.is(res.body.error.code, 'invalid_request');
    assert.match(res.body.error.message, message, JSON.stringify(header));
  }
});

t.run();
