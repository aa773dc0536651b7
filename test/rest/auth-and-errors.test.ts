import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { hashApiKey } from '../../src/security/crypto.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';

const W_SUMMARY = 'aaaaaaaa-0000-4000-8000-000000000001';
const t = suite<{ t: TestApp }>('auth and errors');
t.before(async (ctx) => {
  ctx.t = await startTestApp();
});
t.after(async (ctx) => ctx.t.close());

t('missing, malformed, unknown, revoked and expired keys get 401 unauthorized', async ({ t }) => {
  const cases: [string | null, Record<string, string>][] = [
    [null, {}],
    [null, { authorization: 'Basic d3I6eA==' }],
    [null, { authorization: 'Bearer' }],
    ['wr_nope', {}],
    ['wr_test_bob_revoked', {}],
    ['wr_test_bob_expired', {}],
  ];
  for (const [key, headers] of cases) {
    for (const [m, p] of [
      ['GET', '/workflows'],
      ['POST', '/runs'],
      ['GET', '/runs'],
    ] as const) {
      const res = await t.call(m, p, { key, headers, body: m === 'POST' ? { workflow: W_SUMMARY } : undefined });
      assert.is(res.status, 401, `${key} ${JSON.stringify(headers)} ${m} ${p}`);
      assert.is(res.body.error.code, 'unauthorized');
      assert.is(res.body.error.details, undefined);
    }
  }
});

t('a key revoked or an account restricted while the service runs is refused within a second, and an expiry is exact', async ({ t }) => {
  const sql = (q: string, p: unknown[]) => t.deps.orm.em.fork().execute(q, p);
  const [bob] = await sql(`select id from accounts where handle = 'bob'`, []);
  assert.is((await t.call('GET', '/workflows', { key: 'wr_test_bob_exec' })).status, 200);
  assert.is((await t.call('GET', '/workflows', { key: 'wr_test_bob_read' })).status, 200);
  await sql(`update api_keys set revoked = true where key_hash = ?`, [hashApiKey('wr_test_bob_exec')]);
  await sql(`update api_keys set expires_at = now() + interval '2500 milliseconds' where key_hash = ?`, [hashApiKey('wr_test_bob_read')]);
  try {
    await new Promise((r) => setTimeout(r, 1100));
    const revoked = await t.call('GET', '/workflows', { key: 'wr_test_bob_exec' });
    assert.is(revoked.status, 401);
    assert.is(revoked.body.error.code, 'unauthorized');
    // Looked up afresh (and kept for a second) while it is still valid; its expiry is checked on every request.
    assert.is((await t.call('GET', '/workflows', { key: 'wr_test_bob_read' })).status, 200);
    await new Promise((r) => setTimeout(r, 1500));
    assert.is((await t.call('GET', '/workflows', { key: 'wr_test_bob_read' })).status, 401);
    await sql(`update accounts set restricted = true where id = ?`, [bob!.id]);
    await new Promise((r) => setTimeout(r, 1100));
    const restricted = await t.call('GET', '/workflows', { key: 'wr_test_bob' });
    assert.is(restricted.status, 403);
    assert.is(restricted.body.error.code, 'account_restricted');
  } finally {
    await sql(`update api_keys set revoked = false, expires_at = null where key_hash in (?, ?)`, [
      hashApiKey('wr_test_bob_exec'),
      hashApiKey('wr_test_bob_read'),
    ]);
    await sql(`update accounts set restricted = false where id = ?`, [bob!.id]);
    await new Promise((r) => setTimeout(r, 1100));
  }
});

t('scopes are any-of per operation', async ({ t }) => {
  const exec = 'wr_test_bob_exec';
  const read = 'wr_test_bob_read';
  assert.is((await t.call('GET', '/workflows', { key: exec })).status, 200);
  assert.is((await t.call('GET', '/workflows', { key: read })).status, 200);
  assert.is((await t.call('GET', '/runs', { key: read })).status, 200);
  const start = await t.call('POST', '/runs', { key: read, body: { workflow: W_SUMMARY, inputs: { topic: 'x' } } });
  assert.is(start.status, 403);
  assert.is(start.body.error.code, 'insufficient_scope');
  const ok = await t.call('POST', '/runs', { key: exec, body: { workflow: W_SUMMARY, inputs: { topic: 'x' } } });
  assert.is(ok.status, 202);
  assert.is((await t.call('GET', `/runs/${ok.body.run.id}`, { key: exec })).status, 200);
  assert.is((await t.call('GET', `/runs/${ok.body.run.id}/events`, { key: exec })).body.error.code, 'insufficient_scope');
  assert.is((await t.call('GET', `/runs/${ok.body.run.id}/stream`, { key: exec })).body.error.code, 'insufficient_scope');
});

t('a restricted account gets 403 account_restricted on every call', async ({ t }) => {
  for (const [m, p] of [
    ['GET', '/workflows'],
    ['GET', '/runs'],
    ['POST', '/runs'],
  ] as const) {
    const res = await t.call(m, p, { key: 'wr_test_mallory', body: m === 'POST' ? { workflow: W_SUMMARY } : undefined });
    assert.is(res.status, 403);
    assert.is(res.body.error.code, 'account_restricted');
  }
});

t('unknown routes get the 404 envelope; wrong methods 405 with Allow', async ({ t }) => {
  const unknown = await t.call('GET', '/nothing-here');
  assert.is(unknown.status, 404);
  assert.is(unknown.body.error.code, 'not_found');
  const root = await t.call('GET', `${t.url}/`, { unchecked: true });
  assert.is(root.status, 404);
  assert.is(root.body.error.code, 'not_found');
  const del = await t.call('DELETE', '/runs');
  assert.is(del.status, 405);
  assert.is(del.body.error.code, 'method_not_allowed');
  assert.equal(del.headers.get('allow')!.split(', ').sort(), ['GET', 'POST']);
  const put = await t.call('PUT', `/workflows/${W_SUMMARY}`);
  assert.is(put.status, 405);
  assert.is(put.headers.get('allow'), 'GET');
  const getCancel = await t.call('GET', `/runs/${W_SUMMARY}/cancel`);
  assert.is(getCancel.status, 405);
  assert.is(getCancel.headers.get('allow'), 'POST');
});

t('every response carries X-Request-Id, echoing a sane incoming one', async ({ t }) => {
  const a = await t.call('GET', '/workflows');
  const b = await t.call('GET', '/workflows');
  assert.ok(a.headers.get('x-request-id'));
  assert.is.not(a.headers.get('x-request-id'), b.headers.get('x-request-id'));
  const echoed = await t.call('GET', '/workflows', { headers: { 'x-request-id': 'trace-123' } });
  assert.is(echoed.headers.get('x-request-id'), 'trace-123');
  const junk = await t.call('GET', '/workflows', { headers: { 'x-request-id': 'bad id\twith junk' } });
  assert.is.not(junk.headers.get('x-request-id'), 'bad id\twith junk');
  const err = await t.call('GET', '/nope', { key: null });
  assert.ok(err.headers.get('x-request-id'));
});

t('the OpenAPI document is served to anyone at /v1/openapi.json', async ({ t }) => {
  const res = await t.call('GET', '/openapi.json', { key: null });
  assert.is(res.status, 200);
  assert.is(res.body.openapi.startsWith('3.1'), true);
  assert.is(res.body.info.version, '1.0.0');
  assert.ok(res.body.paths['/runs']);
  // Without PUBLIC_BASE_URL the served server is this service on its bound port, not the file's relative one.
  assert.equal(res.body.servers, [{ url: t.publicBase, description: 'This service' }]);
  assert.match(t.publicBase, /^http:\/\/localhost:\d+\/v1$/);
});

t('the served OpenAPI document names PUBLIC_BASE_URL as its server', async () => {
  const other = await startTestApp({ env: { PUBLIC_BASE_URL: 'https://runs.example.org/api/v1/' } });
  try {
    const res = await other.call('GET', '/openapi.json', { key: null });
    assert.equal(res.body.servers, [{ url: 'https://runs.example.org/api/v1', description: 'This service' }]);
  } finally {
    await other.close();
  }
});

t('health endpoints answer without a key at the server root', async ({ t }) => {
  const h = await fetch(`${t.url}/healthz`);
  assert.is(h.status, 200);
  assert.equal(await h.json(), { status: 'ok' });
  const r = await fetch(`${t.url}/readyz`);
  assert.is(r.status, 200);
  assert.equal(((await r.json()) as { checks: unknown }).checks, { database: true, engine: true });
  assert.ok(r.headers.get('x-request-id'));
});

t('internal errors answer the bare internal_error envelope without details', async ({ t }) => {
  const original = t.deps.orm.em.fork;
  // Break the database for one request: the client must learn nothing about why.
  (t.deps.orm.em as any).fork = () => {
    throw new Error('connection string postgres://secret@db leaked?');
  };
  try {
    const res = await t.call('GET', '/runs');
    assert.is(res.status, 500);
    assert.equal(res.body, { error: { code: 'internal_error', message: 'an unexpected error occurred' } });
    assert.not.match(res.text, 'secret');
  } finally {
    (t.deps.orm.em as any).fork = original;
  }
});

t.run();
