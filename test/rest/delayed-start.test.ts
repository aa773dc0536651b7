import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { START_AFTER_PATTERN, startAfterSeconds } from '../../src/domain/run-start.ts';

/**
 * Delayed starts over REST (docs/design/flow-control.md): Start-After and startAt accept the run at once
 * and keep it out of the queue's line until its start; POST /runs/{id}/reschedule moves that start. The
 * engine here drives nothing (NullEngine), so what is seen is the acceptance and the API's own rules; the
 * start itself is held by test/engine/delayed-start.test.ts.
 */

const W_SUMMARY = 'aaaaaaaa-0000-4000-8000-000000000001';

const t = suite<{ t: TestApp }>('delayed start');
t.before(async (ctx) => {
  ctx.t = await startTestApp();
});
t.after(async (ctx) => ctx.t.close());

const sql = <T = any>(t: TestApp, text: string, params: unknown[] = []) => t.deps.orm.em.fork().execute<T[]>(text, params);
const runCount = async (t: TestApp) => Number((await sql(t, 'select count(*)::int as n from runs'))[0].n);
const body = (extra: Record<string, unknown> = {}) => ({ workflow: W_SUMMARY, inputs: { topic: 'later' }, ...extra });
const start = (t: TestApp, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}) =>
  t.call('POST', '/runs', { body: body(extra), headers });
const iso = (ms: number) => new Date(ms).toISOString();

t('Start-After: accepted at once (202), pending with no queue place and scheduledFor; the queue does not count it', async ({ t }) => {
  const before = Date.now();
  const res = await start(t, {}, { 'start-after': '10m', 'cancel-after': '1h' });
  assert.is(res.status, 202);
  const run = await t.call('GET', `/runs/${res.body.run.id}`);
  assert.is(run.status, 200);
  assert.is(run.body.status, 'pending');
  assert.is(run.body.queue, null);
  const at = Date.parse(run.body.scheduledFor);
  assert.ok(at >= before + 600_000 - 1_000 && at <= Date.now() + 600_000 + 1_000, `scheduledFor ${run.body.scheduledFor}`);
  // Cancel-After counts from the scheduled start.
  assert.is(Date.parse(run.body.deadline) - at, 3_600_000);
  // A run queued after it is first in line: the scheduled run is not in the line.
  const queued = await start(t);
  const shown = await t.call('GET', `/runs/${queued.body.run.id}`);
  const [{ n }] = await sql(t, `select count(*)::int as n from runs where status = 'pending' and phase = 'queued'`);
  assert.is(shown.body.queue.position, n);
  assert.not.ok('scheduledFor' in shown.body, 'a run without a delayed start has no scheduledFor');
  const [row] = await sql(t, 'select phase, cap_usd from runs where id = ?', [res.body.run.id]);
  assert.is(row.phase, 'scheduled');
  assert.ok(Number(row.cap_usd) > 0, 'the spend cap is reserved at acceptance, as for any run');
});

t('startAt in the body, in a batch item, and a start already past (queued at once)', async ({ t }) => {
  const at = iso(Date.now() + 3_600_000);
  const single = await start(t, { startAt: at });
  assert.is(single.status, 202);
  assert.is((await t.call('GET', `/runs/${single.body.run.id}`)).body.scheduledFor, at);
  const past = await start(t, { startAt: iso(Date.now() - 60_000) });
  const [row] = await sql(t, 'select phase, scheduled_for from runs where id = ?', [past.body.run.id]);
  assert.is(row.phase, 'queued');
  assert.is(row.scheduled_for, null);
  const batch = await t.call('POST', '/runs/batch', { body: { runs: [body({ startAt: at }), body()] } });
  assert.is(batch.status, 202);
  const phases = await sql(t, 'select id, phase from runs where id in (?)', [batch.body.items.map((i: any) => i.run.id)]);
  const byId = new Map(phases.map((p) => [p.id, p.phase]));
  assert.is(byId.get(batch.body.items[0].run.id), 'scheduled');
  assert.is(byId.get(batch.body.items[1].run.id), 'queued');
  // Start-After on a batch applies to every item.
  const later = await t.call('POST', '/runs/batch', { body: { runs: [body(), body()] }, headers: { 'start-after': '2h' } });
  const rows = await sql(t, 'select phase from runs where id in (?)', [later.body.items.map((i: any) => i.run.id)]);
  assert.equal(
    rows.map((r) => r.phase),
    ['scheduled', 'scheduled'],
  );
});

t('refused with 400 invalid_request and nothing written: bad or too long Start-After, bad or too far startAt, both', async ({ t }) => {
  const before = await runCount(t);
  const refusals: [Record<string, unknown>, Record<string, string>][] = [
    [{}, { 'start-after': '0s' }],
    [{}, { 'start-after': '8d' }],
    [{}, { 'start-after': '604801s' }],
    [{}, { 'start-after': '10' }],
    [{}, { 'start-after': '1w' }],
    [{ startAt: 'tomorrow' }, {}],
    [{ startAt: 12 }, {}],
    [{ startAt: iso(Date.now() + 8 * 86_400_000) }, {}],
    [{ startAt: iso(Date.now() + 60_000) }, { 'start-after': '1m' }],
  ];
  for (const [extra, headers] of refusals) {
    const res = await start(t, extra, headers);
    assert.is(res.status, 400, JSON.stringify({ extra, headers }));
    assert.is(res.body.error.code, 'invalid_request');
  }
  const item = await t.call('POST', '/runs/batch', { body: { runs: [body({ startAt: 'soon' }), body()] } });
  assert.is(item.status, 202);
  assert.is(item.body.items[0].error.code, 'invalid_request');
  assert.is(item.body.refused, 1);
  const header = await t.call('POST', '/runs/batch', { body: { runs: [body()] }, headers: { 'start-after': '8d' } });
  assert.is(header.status, 400);
  assert.is(await runCount(t), before + 1);
});

t('the Start-After pattern of the document is exactly what the parser takes', async ({ t }) => {
  const doc = (await t.call('GET', '/openapi.json')).body;
  assert.is(doc.components.parameters.StartAfter.schema.pattern, START_AFTER_PATTERN);
  const pattern = new RegExp(START_AFTER_PATTERN);
  const limits: Record<string, number> = { s: 604_800, m: 10_080, h: 168, d: 7 };
  for (const [unit, max] of Object.entries(limits)) {
    // Every value up to 200, and around each unit's limit and each change of digit count.
    const around = [max, 999, 9_999, 99_999].flatMap((v) => [v - 2, v - 1, v, v + 1, v + 2]);
    for (const n of new Set([...Array.from({ length: 201 }, (_, i) => i), ...around])) {
      const value = `${n}${unit}`;
      let parsed: number | null = null;
      try {
        parsed = startAfterSeconds(value);
      } catch {
        parsed = null;
      }
      assert.is(pattern.test(value), parsed !== null, value);
    }
    assert.not.ok(pattern.test(`01${unit}`));
  }
});

t('reschedule: moves the start and the deadline with it; 409 not_scheduled once in line; 404 and 400 as documented', async ({ t }) => {
  const res = await start(t, {}, { 'start-after': '1h', 'cancel-after': '30m' });
  const id = res.body.run.id;
  const first = (await t.call('GET', `/runs/${id}`)).body;
  const to = iso(Date.now() + 2 * 3_600_000);
  const moved = await t.call('POST', `/runs/${id}/reschedule`, { body: { startAt: to } });
  assert.is(moved.status, 200);
  assert.is(moved.body.scheduledFor, to);
  assert.is(moved.body.queue, null);
  assert.is(Date.parse(moved.body.deadline) - Date.parse(to), 1_800_000, 'the deadline keeps its distance from the start');
  assert.ok(Date.parse(first.deadline) < Date.parse(moved.body.deadline));

  for (const bad of [{}, { startAt: 'x' }, { startAt: iso(Date.now() + 8 * 86_400_000) }, { startAt: to, extra: 1 }]) {
    const r = await t.call('POST', `/runs/${id}/reschedule`, { body: bad });
    assert.is(r.status, 400, JSON.stringify(bad));
    assert.is(r.body.error.code, 'invalid_request');
  }
  const missing = await t.call('POST', '/runs/00000000-0000-4000-8000-000000000000/reschedule', { body: { startAt: to } });
  assert.is(missing.status, 404);
  assert.is(missing.body.error.code, 'not_found');
  const other = await t.call('POST', `/runs/${id}/reschedule`, { key: 'wr_test_alice', body: { startAt: to } });
  assert.is(other.status, 404, "another account's run is unknown");

  // A start already past: the run enters the line with the next round (the row says when).
  const now = await t.call('POST', `/runs/${id}/reschedule`, { body: { startAt: iso(Date.now() - 1_000) } });
  assert.is(now.status, 200);
  assert.ok(Date.parse(now.body.scheduledFor) <= Date.now() + 1_000);

  // A run queued at once has no scheduled start to move.
  const plain = await start(t);
  const refused = await t.call('POST', `/runs/${plain.body.run.id}/reschedule`, { body: { startAt: to } });
  assert.is(refused.status, 409);
  assert.is(refused.body.error.code, 'not_scheduled');
});

t('a scheduled run is cancelled as any pending run, not charged', async ({ t }) => {
  const res = await start(t, {}, { 'start-after': '1h' });
  const cancelled = await t.call('POST', `/runs/${res.body.run.id}/cancel`);
  assert.is(cancelled.status, 200);
  assert.is(cancelled.body.status, 'cancelled');
  const [row] = await sql(t, 'select billing_status, cap_usd from runs where id = ?', [res.body.run.id]);
  assert.is(row.billing_status, 'not_charged');
  const again = await t.call('POST', `/runs/${res.body.run.id}/reschedule`, { body: { startAt: iso(Date.now() + 60_000) } });
  assert.is(again.status, 409);
});

t.run();
