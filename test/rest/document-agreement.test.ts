import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { readDateTime } from '../../src/domain/date-time.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';

/**
 * Where openapi/openapi.yaml and the service could read a value differently, they read it the same
 * way (docs/design/rules.md, "Request parameters"): integers written plainly, RFC 3339 date-times
 * strictly (a leap second taken), idempotency keys counted in characters, and no null where the
 * document allows none.
 */

const W_SUMMARY = 'aaaaaaaa-0000-4000-8000-000000000001';
const KEY = 'wr_test_bob';

const t = suite<{ t: TestApp; runId: string }>('the document and the service agree');
t.before(async (ctx) => {
  ctx.t = await startTestApp();
  const res = await ctx.t.call('POST', '/runs', { key: KEY, body: { workflow: W_SUMMARY, inputs: { topic: 'agreement' } } });
  assert.is(res.status, 202, res.text);
  ctx.runId = res.body.run.id;
});
t.after(async (ctx) => ctx.t.close());

const LENIENT_INTEGERS = ['0x10', '1e1', ' 10', '+10', '10.0', '-0', '5\n', '010', '10 ', '0b1', '١٠'];

t("integer query parameters and cursors take plain decimal integers only; anything else is the spec's 400", async ({ t, runId }) => {
  const cases: [string, string, string][] = [
    ['/workflows?limit=', 'invalid_request', 'limit'],
    ['/workflows?offset=', 'invalid_request', 'offset'],
    ['/runs?limit=', 'invalid_request', 'limit'],
    [`/workflows/${W_SUMMARY}/versions?offset=`, 'invalid_request', 'offset'],
    [`/runs/${runId}/events?afterSequence=`, 'invalid_cursor', 'afterSequence'],
    [`/runs/${runId}/stream?afterSequence=`, 'invalid_cursor', 'afterSequence'],
  ];
  for (const [path, code, name] of cases) {
    for (const value of LENIENT_INTEGERS) {
      const res = await t.call('GET', `${path}${encodeURIComponent(value)}`, { key: KEY });
      assert.is(res.status, 400, `${path}${JSON.stringify(value)}: ${res.text}`);
      assert.is(res.body.error.code, code);
      assert.match(res.body.error.message, name);
    }
    if (path.includes('/stream')) continue; // a valid cursor opens a stream that stays open
    const fine = await t.call('GET', `${path}${name === 'limit' ? '10' : '0'}`, { key: KEY });
    assert.is(fine.status, 200, `${path}: ${fine.text}`);
  }
  for (const value of ['0x1', '1e0', '+1', '1.0', '-0', '01']) {
    const res = await fetch(`${t.base}/runs/${runId}/stream`, { headers: { authorization: `Bearer ${KEY}`, 'last-event-id': value } });
    assert.is(res.status, 400, `Last-Event-ID ${value}`);
    assert.is(((await res.json()) as { error: { code: string } }).error.code, 'invalid_cursor');
  }
});

t('createdAfter/createdBefore: RFC 3339 only, refused once in the same words; a leap second is taken', async ({ t }) => {
  for (const value of [
    '2026-01-31T12:00:00+05',
    '2026-01-31T12:00:00+0530',
    '2026-01-31 12:00:00Z',
    '2026-01-31T12:00Z',
    '2026-02-30T12:00:00Z',
    '2026-01-31T12:00:60Z',
    '2026-01-31T12:00:00+24:00',
  ]) {
    for (const name of ['createdAfter', 'createdBefore']) {
      const res = await t.call('GET', `/runs?${name}=${encodeURIComponent(value)}`, { key: KEY });
      assert.is(res.status, 400, `${name}=${value}: ${res.text}`);
      assert.is(res.body.error.code, 'invalid_request');
      assert.is(res.body.error.message, `${name} must be a date-time (RFC 3339) such as 2026-01-31T12:00:00Z`);
    }
  }
  for (const value of ['2016-12-31T23:59:60Z', '2017-01-01T05:29:60+05:30', '2026-01-31t12:00:00.5z', '2026-01-31T12:00:00-00:00']) {
    const res = await t.call('GET', `/runs?createdAfter=${encodeURIComponent(value)}`, { key: KEY });
    assert.is(res.status, 200, `${value}: ${res.text}`);
  }
  // The leap second is the next day's first instant, its fraction kept.
  assert.is(new Date(readDateTime('2016-12-31T23:59:60.25Z')!.epochMs).toISOString(), '2017-01-01T00:00:00.000Z');
  assert.is(readDateTime('2016-12-31T23:59:60.25Z')!.fraction, '25');
  assert.is(readDateTime('2026-01-31T12:00:00+0530'), null);
});

t("the idempotency key is counted in characters, as the document's maxLength counts them, in the body and the header", async ({ t }) => {
  const start = (body: Record<string, unknown>, headers: Record<string, string> = {}) =>
    t.call('POST', '/runs', { key: KEY, body: { workflow: W_SUMMARY, inputs: { topic: 'keys' }, ...body }, headers });
  const emoji = '😀'.repeat(255);
  const accepted = await start({ idempotencyKey: emoji });
  assert.is(accepted.status, 202, accepted.text);
  const replay = await start({ idempotencyKey: emoji });
  assert.is(replay.body.run.id, accepted.body.run.id);
  for (const key of ['😀'.repeat(256), `${'k'.repeat(255)} `]) {
    const res = await start({ idempotencyKey: key });
    assert.is(res.status, 400, res.text);
    assert.is(res.body.error.code, 'invalid_request');
    assert.match(res.body.error.message, 'at most 255 characters');
  }
  const header = await start({}, { 'idempotency-key': `${'h'.repeat(255)}` });
  assert.is(header.status, 202, header.text);
  assert.is((await start({}, { 'idempotency-key': `${'h'.repeat(256)}` })).status, 400);
});

t('null is refused wherever the document allows none in a POST /runs body', async ({ t }) => {
  const cases: [Record<string, unknown>, string, RegExp][] = [
    [{ workflow: W_SUMMARY, inputs: { topic: 'x' }, metadata: null }, 'invalid_request', /metadata must be an object/],
    [{ workflow: W_SUMMARY, inputs: { topic: 'x' }, idempotencyKey: null }, 'invalid_request', /idempotencyKey must be a string/],
    [{ workflow: W_SUMMARY, inputs: { topic: 'x' }, version: null }, 'invalid_request', /"version" must be a UUID string/],
    [{ workflow: null, workflowId: W_SUMMARY, inputs: { topic: 'x' } }, 'invalid_request', /"workflow" must be a UUID string/],
    [{ workflow: W_SUMMARY, workflowId: null, inputs: { topic: 'x' } }, 'invalid_request', /"workflowId" must be a UUID string/],
    [{ workflow: W_SUMMARY, inputs: null }, 'invalid_inputs', /inputs must be an object/],
  ];
  for (const [body, code, message] of cases) {
    const res = await t.call('POST', '/runs', { key: KEY, body });
    assert.is(res.status, 400, `${JSON.stringify(body)}: ${res.text}`);
    assert.is(res.body.error.code, code);
    assert.match(res.body.error.code === 'invalid_inputs' ? res.body.error.details[0].message : res.body.error.message, message);
  }
});

t.run();
