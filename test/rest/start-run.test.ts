import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from '../helpers/app.ts';

const W_SUMMARY = 'aaaaaaaa-0000-4000-8000-000000000001';
const W_TYPED = 'aaaaaaaa-0000-4000-8000-000000000002';
const W_LEGACY = 'aaaaaaaa-0000-4000-8000-000000000003';
const W_HIDDEN = 'aaaaaaaa-0000-4000-8000-000000000004';
const W_NOAPI = 'aaaaaaaa-0000-4000-8000-000000000005';
const W_PAUSED = 'aaaaaaaa-0000-4000-8000-000000000006';
const W_GITHUB = 'aaaaaaaa-0000-4000-8000-000000000007';
const V1 = 'aaaaaaaa-0000-4000-8000-0000000000a1';
const V2 = 'aaaaaaaa-0000-4000-8000-0000000000a2';

const t = suite<{ t: TestApp }>('POST /runs');
t.before(async (ctx) => {
  ctx.t = await startTestApp();
});
t.after(async (ctx) => ctx.t.close());

const count = async (t: TestApp, sql: string, params: unknown[] = []) =>
  Number((await t.deps.orm.em.fork().execute<{ n: number }[]>(`select count(*)::int as n from ${sql}`, params))[0]!.n);

t('a valid request is accepted with 202, exactly the AcceptedRun fields, Location and rate headers', async ({ t }) => {
  const res = await t.call('POST', '/runs', { body: { workflow: W_SUMMARY, inputs: { topic: 'owls' } } });
  assert.is(res.status, 202);
  assert.equal(Object.keys(res.body), ['run']);
  const run = res.body.run;
  assert.equal(Object.keys(run).sort(), ['eventsUrl', 'id', 'status', 'statusUrl', 'streamUrl']);
  assert.is(run.status, 'accepted');
  assert.is(run.statusUrl, `${t.publicBase}/runs/${run.id}`);
  assert.is(run.eventsUrl, `${run.statusUrl}/events`);
  assert.is(run.streamUrl, `${run.statusUrl}/stream`);
  assert.is(res.headers.get('location'), run.statusUrl);
  assert.is(res.headers.get('ratelimit-limit'), '60');
  assert.ok(Number(res.headers.get('ratelimit-remaining')) < 60);
  const rows = await t.deps.orm.em.fork().execute<any[]>('select status, phase, version_id, inputs from runs where id = ?', [run.id]);
  assert.is(rows[0].status, 'pending');
  assert.is(rows[0].version_id, V1);
  const events = await t.call('GET', `/runs/${run.id}/events`);
  assert.equal(
    events.body.events.map((e: any) => [e.type, e.sequence, e.data.status]),
    [['run.queued', 1, 'pending']],
  );
});

t('inputs may be sent by nodeId or exact name; defaults fill the rest', async ({ t }) => {
  const res = await t.call('POST', '/runs', { key: 'wr_test_carol', body: { workflow: W_SUMMARY, inputs: { Topic: 'bees', Tone: 'casual' } } });
  assert.is(res.status, 202);
  const [row] = await t.deps.orm.em.fork().execute<any[]>('select inputs, version_id from runs where id = ?', [res.body.run.id]);
  assert.equal(row.inputs, { topic: 'bees', count: 3, tone: 'casual' });
  assert.is(row.version_id, V2);
});

t('input rules reject unknown, missing, ambiguous, conflicting and mistyped inputs with details', async ({ t }) => {
  const before = await count(t, 'runs');
  const cases: [unknown, string][] = [
    [{ topic: 'x', extra: 1 }, 'extra'],
    [{}, 'topic'],
    [{ topic: 5 }, 'topic'],
    [{ topic: 'a', Topic: 'b' }, 'Topic'],
  ];
  for (const [inputs, offending] of cases) {
    const res = await t.call('POST', '/runs', { body: { workflow: W_SUMMARY, inputs } });
    assert.is(res.status, 400, JSON.stringify(inputs));
    assert.is(res.body.error.code, 'invalid_inputs');
    assert.ok(
      res.body.error.details.some((d: any) => d.input === offending),
      JSON.stringify(res.body.error.details),
    );
  }
  const same = await t.call('POST', '/runs', { body: { workflow: W_SUMMARY, inputs: { topic: 'a', Topic: 'a' } } });
  assert.is(same.status, 202);
  const ambiguous = await t.call('POST', '/runs', { body: { workflow: W_TYPED, inputs: { Note: 'x', n: 1 } } });
  assert.is(ambiguous.status, 400);
  assert.match(ambiguous.body.error.details[0].message, /ambiguous/);
  const typed: [Record<string, unknown>, string][] = [
    [{ n: '1' }, 'n'],
    [{ n: 1, site: 'ftp://x' }, 'site'],
    [{ n: 1, data: '{nope' }, 'data'],
    [{ n: 1, pic: { __workflowMedia: true, kind: 'image', url: 'https://x.test/a.png?api_key=1', mimeType: 'image/png', filename: 'a.png' } }, 'pic'],
    [{ n: 1, pic: { __workflowMedia: true, kind: 'sculpture', url: 'https://x.test/a.png', mimeType: 'image/png', filename: 'a.png' } }, 'pic'],
    [{ n: 1, token: 42 }, 'token'],
  ];
  for (const [inputs, offending] of typed) {
    const res = await t.call('POST', '/runs', { body: { workflow: W_TYPED, inputs } });
    assert.is(res.status, 400, JSON.stringify(inputs));
    assert.is(res.body.error.details[0].input, offending);
  }
  assert.is(await count(t, 'runs'), before + 1);
});

t('typed inputs are normalised: JSON strings parsed, media objects kept, passwords sealed out of the run row', async ({ t }) => {
  const pic = { __workflowMedia: true, kind: 'image', base64: 'aGVsbG8=', mimeType: 'image/png', filename: 'a.png' };
  const res = await t.call('POST', '/runs', {
    body: { workflow: W_TYPED, inputs: { n: 2.5, data: '{"a":[1,2]}', pic: JSON.stringify(pic), token: 'super-secret-value', site: 'https://example.com' } },
  });
  assert.is(res.status, 202);
  const em = t.deps.orm.em.fork();
  const [row] = await em.execute<any[]>('select inputs from runs where id = ?', [res.body.run.id]);
  assert.equal(row.inputs.data, { a: [1, 2] });
  assert.equal(row.inputs.pic, pic);
  assert.is(row.inputs.token, null);
  const dump = JSON.stringify(await em.execute('select row_to_json(s) as r from run_secrets s'));
  assert.not.match(dump, 'super-secret-value');
  const secrets = await em.execute<any[]>('select name, ciphertext from run_secrets where run_id = ?', [res.body.run.id]);
  assert.is(secrets.length, 1);
  assert.is(t.deps.sealer.open(secrets[0].ciphertext), 'super-secret-value');
  const events = await t.call('GET', `/runs/${res.body.run.id}/events`);
  assert.not.match(events.text, 'super-secret-value');
});

t('body errors: invalid JSON, non-object bodies, missing workflow, bad content type', async ({ t }) => {
  const bad = await t.call('POST', '/runs', { rawBody: '{"workflow":', headers: { 'content-type': 'application/json' } });
  assert.is(bad.status, 400);
  assert.is(bad.body.error.code, 'invalid_json');
  for (const raw of ['[]', '"x"', 'null', '42']) {
    const r = await t.call('POST', '/runs', { rawBody: raw, headers: { 'content-type': 'application/json' } });
    assert.is(r.status, 400, raw);
    assert.is(r.body.error.code, 'invalid_request', raw);
  }
  const missing = await t.call('POST', '/runs', { body: { inputs: {} } });
  assert.is(missing.body.error.code, 'missing_workflow');
  const alias = await t.call('POST', '/runs', { body: { workflowId: W_SUMMARY, inputs: { topic: 'alias' } } });
  assert.is(alias.status, 202);
  const form = await t.call('POST', '/runs', { rawBody: 'workflow=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
  assert.is(form.status, 415);
  assert.is(form.body.error.code, 'unsupported_media_type');
  const huge = await t.call('POST', '/runs', {
    rawBody: JSON.stringify({ workflow: W_SUMMARY, inputs: { topic: 'x'.repeat(1_100_000) } }),
    headers: { 'content-type': 'application/json' },
  });
  assert.is(huge.status, 413);
});

t('entitlement: unknown or invisible workflows are 404; legacy, API-disabled and paused ones 403', async ({ t }) => {
  for (const w of ['aaaaaaaa-0000-4000-8000-00000000ffff', W_HIDDEN, 'nope']) {
    const r = await t.call('POST', '/runs', { body: { workflow: w } });
    assert.is(r.status, 404, w);
    assert.is(r.body.error.code, 'not_found');
  }
  assert.is((await t.call('POST', '/runs', { body: { workflow: W_LEGACY } })).body.error.code, 'forbidden');
  assert.is((await t.call('POST', '/runs', { body: { workflow: W_NOAPI } })).body.error.code, 'forbidden');
  const paused = await t.call('POST', '/runs', { body: { workflow: W_PAUSED } });
  assert.is(paused.status, 403);
  assert.is(paused.body.error.code, 'creator_listings_paused');
  const ownerOfPaused = await t.call('POST', '/runs', { key: 'wr_test_pat', body: { workflow: W_PAUSED } });
  assert.is(ownerOfPaused.status, 202);
});

t('version resolution: pins hold, owners pick any version, others only what they may use', async ({ t }) => {
  const pinnedOther = await t.call('POST', '/runs', { body: { workflow: W_SUMMARY, version: V2, inputs: { topic: 'x' } } });
  assert.is(pinnedOther.status, 403);
  const pinned = await t.call('POST', '/runs', { body: { workflow: W_SUMMARY, version: V1, inputs: { topic: 'x' } } });
  assert.is(pinned.status, 202);
  const owner = await t.call('POST', '/runs', { key: 'wr_test_alice', body: { workflow: W_SUMMARY, version: V1, inputs: { topic: 'x' } } });
  assert.is(owner.status, 202);
  const walletActive = await t.call('POST', '/runs', { key: 'wr_test_carol', body: { workflow: W_SUMMARY, version: V2, inputs: { topic: 'x' } } });
  assert.is(walletActive.status, 202);
  const walletOld = await t.call('POST', '/runs', { key: 'wr_test_carol', body: { workflow: W_SUMMARY, version: V1, inputs: { topic: 'x' } } });
  assert.is(walletOld.status, 403);
  // A version of another workflow is as unknown as a made-up one.
  const foreign = await t.call('POST', '/runs', { key: 'wr_test_alice', body: { workflow: W_TYPED, version: V1, inputs: { n: 1 } } });
  assert.is(foreign.status, 403);
  assert.is(foreign.body.error.code, 'forbidden');
});

t('a workflow needing an unconnected integration answers 409 with connect details', async ({ t }) => {
  const res = await t.call('POST', '/runs', { body: { workflow: W_GITHUB } });
  assert.is(res.status, 409);
  assert.is(res.body.error.code, 'integration_connection_required');
  const gh = res.body.error.details.find((d: any) => d.providerId === 'github');
  assert.equal(gh, { provider: 'GitHub', providerId: 'github', makesChanges: true, connectUrl: `${new URL(t.publicBase).origin}/connections/github` });
  // carol has GitHub but not Slack.
  const carol = await t.call('POST', '/runs', { key: 'wr_test_carol', body: { workflow: W_GITHUB } });
  assert.equal(
    carol.body.error.details.map((d: any) => d.providerId),
    ['slack'],
  );
});

t('idempotency: same key and request replays, another request conflicts, header and body must agree', async ({ t }) => {
  const body = { workflow: W_SUMMARY, inputs: { topic: 'idem' } };
  const first = await t.call('POST', '/runs', { body, headers: { 'idempotency-key': 'k-1' } });
  assert.is(first.status, 202);
  assert.is(first.headers.get('idempotent-replayed'), null);
  const byName = await t.call('POST', '/runs', { body: { workflow: W_SUMMARY, inputs: { Topic: 'idem' }, idempotencyKey: '  k-1 ' } });
  assert.is(byName.status, 202);
  assert.is(byName.body.run.id, first.body.run.id);
  assert.is(byName.headers.get('idempotent-replayed'), 'true');
  const conflict = await t.call('POST', '/runs', { body: { workflow: W_SUMMARY, inputs: { topic: 'other' } }, headers: { 'idempotency-key': 'k-1' } });
  assert.is(conflict.status, 409);
  assert.is(conflict.body.error.code, 'idempotency_conflict');
  const withVersion = await t.call('POST', '/runs', { body: { ...body, version: V1 }, headers: { 'idempotency-key': 'k-1' } });
  assert.is(withVersion.status, 409);
  const mismatch = await t.call('POST', '/runs', { body: { ...body, idempotencyKey: 'k-2' }, headers: { 'idempotency-key': 'k-1' } });
  assert.is(mismatch.body.error.code, 'invalid_request');
  const tooLong = await t.call('POST', '/runs', { body, headers: { 'idempotency-key': 'x'.repeat(256) } });
  assert.is(tooLong.body.error.code, 'invalid_request');
  const empty = await t.call('POST', '/runs', { body: { ...body, idempotencyKey: '   ' } });
  assert.is(empty.body.error.code, 'invalid_request');
  const max = await t.call('POST', '/runs', { body, headers: { 'idempotency-key': 'y'.repeat(255) } });
  assert.is(max.status, 202);
  // Keys are scoped to the account: another key of bob replays too, carol's same key is separate.
  const otherKey = await t.call('POST', '/runs', { key: 'wr_test_bob_exec', body, headers: { 'idempotency-key': 'k-1' } });
  assert.is(otherKey.body.run.id, first.body.run.id);
  const carol = await t.call('POST', '/runs', { key: 'wr_test_carol', body, headers: { 'idempotency-key': 'k-1' } });
  assert.is.not(carol.body.run.id, first.body.run.id);
  // Keys are case-sensitive.
  const upper = await t.call('POST', '/runs', { body, headers: { 'idempotency-key': 'K-1' } });
  assert.is.not(upper.body.run.id, first.body.run.id);
});

t('N concurrent identical requests with one key create exactly one run', async ({ t }) => {
  const before = await count(t, 'runs');
  const body = { workflow: W_SUMMARY, inputs: { topic: 'race' } };
  const all = await Promise.all(
    Array.from({ length: 12 }, () => t.call('POST', '/runs', { key: 'wr_test_alice', body, headers: { 'idempotency-key': 'race-key' } })),
  );
  assert.ok(all.every((r) => r.status === 202));
  assert.is(new Set(all.map((r) => r.body.run.id)).size, 1);
  assert.is(all.filter((r) => r.headers.get('idempotent-replayed') === 'true').length, 11);
  assert.is(await count(t, 'runs'), before + 1);
});

t('an expired idempotency record no longer replays', async ({ t }) => {
  const body = { workflow: W_SUMMARY, inputs: { topic: 'old' } };
  const first = await t.call('POST', '/runs', { key: 'wr_test_alice', body, headers: { 'idempotency-key': 'old-key' } });
  await t.deps.orm.em.fork().execute(`update idempotency_records set expires_at = now() - interval '1 second' where key = 'old-key'`);
  const second = await t.call('POST', '/runs', { key: 'wr_test_alice', body, headers: { 'idempotency-key': 'old-key' } });
  assert.is(second.status, 202);
  assert.is.not(second.body.run.id, first.body.run.id);
});

t('a spend cap answers 402 before any run row exists, counting reserved charges in the window', async ({ t }) => {
  // The capped key allows $0.50 a day; each run of bob's pinned v1 reserves its displayed $0.000100.
  const body = { workflow: W_SUMMARY, inputs: { topic: 'cap' } };
  const first = await t.call('POST', '/runs', { key: 'wr_test_bob_capped', body });
  assert.is(first.status, 202);
  await t.deps.orm.em.fork().execute('update runs set cap_usd = 0.4999 where id = ?', [first.body.run.id]);
  // 0.4999 + 0.0001 = 0.5000: exactly at the cap is still allowed; one more run would exceed it.
  const atCap = await t.call('POST', '/runs', { key: 'wr_test_bob_capped', body });
  assert.is(atCap.status, 202);
  const before = await count(t, 'runs');
  const over = await t.call('POST', '/runs', { key: 'wr_test_bob_capped', body });
  assert.is(over.status, 402);
  assert.is(over.body.error.code, 'spend_cap_reached');
  assert.is(await count(t, 'runs'), before);
  // The refused acceptance wrote nothing, yet the request still counts against the rate limit.
  assert.is(Number(over.headers.get('ratelimit-remaining')), Number(atCap.headers.get('ratelimit-remaining')) - 1);
  // Reservations from yesterday are outside the daily window.
  await t.deps.orm.em.fork().execute(`update runs set created_at = now() - interval '2 days' where id = ?`, [first.body.run.id]);
  const nextDay = await t.call('POST', '/runs', { key: 'wr_test_bob_capped', body });
  assert.is(nextDay.status, 202);
});

t.run();
