import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { parse } from 'yaml';
import { executeHttpRequest } from '../../src/engine/nodes/http-request.ts';
import type { NodeExecutionContext } from '../../src/engine/nodes/types.ts';
import { assertPublicUrl, type LookupAddress } from '../../src/security/net-guard.ts';
import { MAX_BODY_BYTES } from '../../src/http/respond.ts';
import { finishRun } from '../../src/runs/finish-run.ts';
import { deliverDueWebhooks } from '../../src/services/webhooks/deliver-webhooks.ts';
import { enqueueRunWebhooks } from '../helpers/outbox.ts';
import type { WebhookDispatcher } from '../../src/services/webhooks/webhook-dispatcher.ts';
import { startTestApp, type CallResult, type TestApp } from '../helpers/app.ts';
import {
  ALL_CATALOG_SECRETS,
  countRuns,
  DAVE_CAPPED_KEY,
  DAVE_KEY,
  DAVE_PROVIDER_KEYS,
  DAVE_WEBHOOK_SECRETS,
  dumpAllTables,
  FUZZ_KEY,
  loadExtraCatalog,
  V,
  W,
} from './helpers/hardening.ts';

/**
 * Security tests mapped to the OWASP API Security Top 10 (2023). Each test name starts with its id.
 * The REST fixture catalog plus the hardening extras (dave: provider keys, webhook secrets, an unlisted
 * workflow, a capped key) are loaded; the engine is the null engine (runs stay pending) unless noted.
 */

type Json = any;
const doc = parse(readFileSync(fileURLToPath(new URL('../../openapi/openapi.yaml', import.meta.url)), 'utf8')) as Json;
const OPERATIONS = Object.entries<Json>(doc.paths).flatMap(([template, item]) =>
  Object.entries<Json>(item)
    .filter(([m]) => ['get', 'post', 'put', 'patch', 'delete'].includes(m))
    .map(([m, op]) => ({ id: op.operationId as string, method: m.toUpperCase(), template, scopes: (op['x-scopes'] ?? []) as string[] })),
);

/** Whether `path` is one of `template`'s paths (a `{param}` is one segment). */
const matches = (template: string, path: string) => new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`).test(path);

const PASSWORD = 'hunter2-password-input-5f8a1c';
const NOT_A_RUN = '0f0f0f0f-0000-4000-8000-00000000beef';

interface Ctx {
  t: TestApp;
  /** bob's pending run. */
  bobRun: string;
  /** bob's run with a password input. */
  bobSecretRun: string;
  /** dave's run of his unlisted workflow. */
  daveRun: string;
}

const s = suite<Ctx>('security (OWASP API Top 10, 2023)');
/** MAX_STREAMS_PER_KEY of this suite's app (the default, 1000, would make the API4 test slow). */
const MAX_STREAMS_PER_KEY = 100;

s.before(async (ctx) => {
  ctx.t = await startTestApp({ env: { MAX_STREAMS_PER_KEY: String(MAX_STREAMS_PER_KEY) } });
  await loadExtraCatalog(ctx.t);
  const start = async (key: string, body: unknown) => {
    const res = await ctx.t.call('POST', '/runs', { key, body });
    assert.is(res.status, 202, res.text);
    return res.body.run.id as string;
  };
  ctx.bobRun = await start('wr_test_bob', { workflow: W.summary, inputs: { topic: 'mine' } });
  ctx.bobSecretRun = await start('wr_test_bob', { workflow: W.typed, inputs: { n: 1, token: PASSWORD, site: 'https://example.com' } });
  ctx.daveRun = await start(DAVE_KEY, { workflow: W.daveSecret });
});
s.after(async (ctx) => ctx.t.close());

/** Fills an operation's path template with one id for every parameter. */
const pathOf = (template: string, id: string) => template.replace(/\{[^}]+\}/g, id);

/** Reads an SSE response's status and headers, then drops the connection. */
async function openStream(t: TestApp, runId: string, key: string): Promise<{ status: number; headers: Headers; body: Json; close: () => void; res: Response }> {
  const ac = new AbortController();
  const res = await fetch(`${t.base}/runs/${runId}/stream`, { headers: { authorization: `Bearer ${key}` }, signal: ac.signal });
  let body: Json;
  if (!(res.headers.get('content-type') ?? '').startsWith('text/event-stream')) body = await res.json();
  // `res` is kept: a response whose unread body is garbage-collected has its connection closed, which
  // would free the stream's slot behind the test's back.
  return { status: res.status, headers: res.headers, body, close: () => ac.abort(), res };
}

// ---------------------------------------------------------------------------------------------------
// API1: broken object level authorization

s("API1 another account's run is 404 on every run route, exactly like a run that does not exist", async ({ t, bobRun }) => {
  const runOps = OPERATIONS.filter((o) => o.template.startsWith('/runs/{'));
  assert.equal(runOps.map((o) => o.id).sort(), ['cancelRun', 'getRun', 'listRunEvents', 'replayRun', 'rescheduleRun', 'streamRun']);
  const later = { startAt: new Date(Date.now() + 3_600_000).toISOString() };
  for (const key of ['wr_test_alice', 'wr_test_carol', 'wr_test_pat', DAVE_KEY, FUZZ_KEY]) {
    for (const op of runOps) {
      const body = op.id === 'rescheduleRun' ? later : undefined;
      const theirs = await t.call(op.method, pathOf(op.template, bobRun), { key, body });
      const missing = await t.call(op.method, pathOf(op.template, NOT_A_RUN), { key, body });
      assert.is(theirs.status, 404, `${key} ${op.id}`);
      // No oracle: the answer for someone else's run is the answer for no run at all.
      assert.equal(theirs.body, missing.body, `${key} ${op.id}`);
    }
    const list = await t.call('GET', '/runs?limit=50', { key });
    assert.not.ok(
      list.body.runs.some((r: Json) => r.id === bobRun),
      `${key} lists bob's run`,
    );
  }
  // The cancels above changed nothing: bob's run is still pending and still his.
  const mine = await t.call('GET', `/runs/${bobRun}`, { key: 'wr_test_bob' });
  assert.is(mine.status, 200);
  assert.is(mine.body.status, 'pending');
  const events = await t.call('GET', `/runs/${bobRun}/events`, { key: 'wr_test_bob' });
  assert.equal(
    events.body.events.map((e: Json) => e.type),
    ['run.queued'],
  );
});

s('API1 the same holds for every key of the owning account and for the stream of a live run', async ({ t, bobRun, daveRun }) => {
  // Any key of the account may read its runs (scopes permitting); keys of other accounts never.
  assert.is((await t.call('GET', `/runs/${bobRun}`, { key: 'wr_test_bob_read' })).status, 200);
  assert.is((await t.call('GET', `/runs/${bobRun}`, { key: 'wr_test_bob_capped' })).status, 200);
  const other = await openStream(t, daveRun, 'wr_test_bob');
  assert.is(other.status, 404);
  assert.is(other.body.error.code, 'not_found');
  const own = await openStream(t, daveRun, DAVE_KEY);
  assert.is(own.status, 200);
  own.close();
});

s("API1 another account's unlisted workflow, its versions and its runs are 404 everywhere", async ({ t }) => {
  const wfOps = OPERATIONS.filter((o) => o.template.startsWith('/workflows/{'));
  assert.equal(wfOps.map((o) => o.id).sort(), ['acceptWorkflowUpdate', 'getWorkflow', 'listWorkflowVersions']);
  for (const key of ['wr_test_bob', 'wr_test_alice', 'wr_test_carol', FUZZ_KEY]) {
    for (const op of wfOps) {
      const hidden = await t.call(op.method, pathOf(op.template, W.daveSecret), { key });
      const missing = await t.call(op.method, pathOf(op.template, NOT_A_RUN), { key });
      assert.is(hidden.status, 404, `${key} ${op.id}`);
      assert.equal(hidden.body, missing.body);
    }
    const before = await countRuns(t);
    for (const body of [{ workflow: W.daveSecret }, { workflow: W.daveSecret, version: V.daveV1 }, { workflowId: W.daveSecret }]) {
      const run = await t.call('POST', '/runs', { key, body });
      assert.is(run.status, 404, JSON.stringify(body));
    }
    assert.is(await countRuns(t), before);
    // Nor does it leak through lists and filters.
    const list = await t.call('GET', '/workflows?limit=50&q=Dave', { key });
    assert.equal(list.body.workflows, []);
    const filtered = await t.call('GET', `/runs?workflow=${W.daveSecret}`, { key });
    assert.equal(filtered.body.runs, []);
  }
  // Alice's unlisted draft likewise, for everyone but alice.
  assert.is((await t.call('GET', `/workflows/${W.hidden}/versions`, { key: DAVE_KEY })).status, 404);
  assert.is((await t.call('GET', `/workflows/${W.hidden}`, { key: 'wr_test_alice' })).status, 200);
  // dave sees all of it.
  const versions = await t.call('GET', `/workflows/${W.daveSecret}/versions`, { key: DAVE_KEY });
  assert.equal(versions.body.versions.map((v: Json) => v.id).sort(), [V.daveV1, V.daveV2]);
});

s("API1 a version id of someone else's workflow cannot be run through a workflow the caller may use", async ({ t }) => {
  const before = await countRuns(t);
  const forged = await t.call('POST', '/runs', { key: 'wr_test_carol', body: { workflow: W.typed, version: V.daveV1, inputs: { n: 1 } } });
  const madeUp = await t.call('POST', '/runs', { key: 'wr_test_carol', body: { workflow: W.typed, version: NOT_A_RUN, inputs: { n: 1 } } });
  assert.is(forged.status, 403);
  assert.equal(forged.body, madeUp.body);
  assert.is(await countRuns(t), before);
});

// ---------------------------------------------------------------------------------------------------
// API2: broken authentication

s('API2 no table holds a catalog secret or a password input in clear; API keys are stored as their sha256', async ({ t }) => {
  const tables = await dumpAllTables(t);
  assert.ok(Object.keys(tables).length >= 10, `tables: ${Object.keys(tables)}`);
  assert.ok(tables.api_keys!.length > 0 && tables.provider_keys!.length > 0 && tables.webhook_endpoints!.length > 0 && tables.run_secrets!.length > 0);
  for (const [table, text] of Object.entries(tables)) {
    for (const secret of [...ALL_CATALOG_SECRETS, PASSWORD]) {
      assert.not.ok(text.includes(secret), `${table} holds ${secret}`);
    }
  }
  const em = t.deps.orm.em.fork();
  const hashes = new Set((await em.execute<{ key_hash: string }[]>('select key_hash from api_keys')).map((r) => r.key_hash));
  for (const secret of ALL_CATALOG_SECRETS.filter((x) => x.startsWith('wr_test_'))) {
    assert.ok(hashes.has(createHash('sha256').update(secret).digest('hex')), `no hash for ${secret}`);
  }
  // The sealed values are real ciphertexts of the secrets (so they are usable, and not stored twice).
  const [pk] = await em.execute<{ ciphertext: string }[]>(`select ciphertext from provider_keys where provider = 'openai'`);
  assert.is(t.deps.sealer.open(pk!.ciphertext), DAVE_PROVIDER_KEYS.openai);
  const webhookSecrets = (await em.execute<{ secret_ciphertext: string }[]>('select secret_ciphertext from webhook_endpoints')).map((r) =>
    t.deps.sealer.open(r.secret_ciphertext),
  );
  assert.equal(webhookSecrets.sort(), [...DAVE_WEBHOOK_SECRETS].sort());
});

s('API2 only an exact, live key in the Authorization header authenticates', async ({ t }) => {
  const denied: [string | null, Record<string, string>, string][] = [
    [null, {}, '/workflows?api_key=wr_test_bob'],
    [null, {}, '/workflows?access_token=wr_test_bob'],
    [null, { 'x-api-key': 'wr_test_bob' }, '/workflows'],
    [null, { cookie: 'api_key=wr_test_bob' }, '/workflows'],
    [null, { authorization: 'Basic d3JfdGVzdF9ib2I6' }, '/workflows'],
    [null, { authorization: 'Token wr_test_bob' }, '/workflows'],
    [null, { authorization: 'Bearer wr_test_bob wr_test_bob' }, '/workflows'],
    ['WR_TEST_BOB', {}, '/workflows'],
    ['wr_test_bo', {}, '/workflows'],
    ['wr_test_bobx', {}, '/workflows'],
    ['wr_test_', {}, '/workflows'],
    [createHash('sha256').update('wr_test_bob').digest('hex'), {}, '/workflows'],
  ];
  for (const [key, headers, path] of denied) {
    const res = await t.call('GET', path, { key, headers });
    assert.is(res.status, 401, `${key} ${JSON.stringify(headers)} ${path}`);
    assert.is(res.body.error.code, 'unauthorized');
    // The answer never echoes what was sent.
    assert.not.ok(res.text.includes('wr_test_bob'), res.text);
  }
  assert.is((await t.call('GET', '/workflows', { headers: { authorization: 'bearer   wr_test_bob  ' }, key: null })).status, 200);
});

// ---------------------------------------------------------------------------------------------------
// API3: broken object property level authorization

s('API3 client-supplied owner, status, price or limit fields cannot shape the run that is created', async ({ t }) => {
  const res = await t.call('POST', '/runs', {
    key: 'wr_test_carol',
    body: {
      workflow: W.summary,
      inputs: { topic: 'mass assignment' },
      accountId: '11111111-1111-4111-8111-111111111111',
      account_id: '11111111-1111-4111-8111-111111111111',
      apiKeyId: 'x',
      status: 'completed',
      billingStatus: 'settled',
      displayedChargeUsd: 0,
      displayedPriceUsd: '0',
      computeLimitUsd: '1000000',
      outputs: [{ nodeId: 'out', name: 'x', type: 'text', value: 'forged' }],
      userAccess: 'owned',
    },
  });
  assert.ok(res.status === 202 || res.status === 400, res.text);
  if (res.status === 202) {
    const [row] = await t.deps.orm.em
      .fork()
      .execute<Json[]>('select account_id, status, billing_status, displayed_price_usd, compute_limit_usd, outputs, user_access from runs where id = ?', [
        res.body.run.id,
      ]);
    assert.is(row.account_id, '33333333-3333-4333-8333-333333333333');
    assert.is(row.status, 'pending');
    assert.is(row.billing_status, 'pending');
    assert.is(row.user_access, 'wallet');
    assert.is(Number(row.displayed_price_usd), 0.2502);
    assert.is(Number(row.compute_limit_usd), Number(t.deps.config.computeLimitUsd));
    assert.equal(typeof row.outputs === 'string' ? JSON.parse(row.outputs) : row.outputs, []);
  }
});

s('API3 no response carries key hashes, ciphertexts, fingerprints, password inputs or internal columns', async ({ t, bobRun, bobSecretRun, daveRun }) => {
  const em = t.deps.orm.em.fork();
  // Give one run outputs and a terminal state, so every view has something to show.
  await em.execute(`update runs set status = 'running', phase = null, started_at = now() where id = ?`, [daveRun]);
  const last = await em.transactional((tx) =>
    finishRun(tx as never, daveRun, {
      status: 'completed',
      outcome: 'completed',
      outputs: [{ nodeId: 'out', name: 'Out', type: 'text', value: 'two' }],
      charge: 'full',
    }),
  );
  t.deps.bus.publish(daveRun, last!.last);
  await t.call('POST', '/runs', { key: 'wr_test_bob', body: { workflow: W.summary, inputs: { topic: 'idem' } }, headers: { 'idempotency-key': 'api3-key' } });

  const texts: string[] = [];
  const keep = (r: CallResult) => {
    texts.push(r.text);
    return r;
  };
  for (const key of ['wr_test_bob', DAVE_KEY]) {
    const workflows = keep(await t.call('GET', '/workflows?limit=50', { key }));
    for (const w of workflows.body.workflows) {
      keep(await t.call('GET', `/workflows/${w.id}`, { key }));
      keep(await t.call('GET', `/workflows/${w.id}/versions`, { key }));
    }
    const runs = keep(await t.call('GET', '/runs?limit=50', { key }));
    assert.ok(runs.body.runs.length > 0);
    // List rows never carry outputs or failure reasons, even for a run that has them.
    for (const row of runs.body.runs) {
      assert.is(row.outputs, undefined);
      assert.is(row.reason, undefined);
    }
    for (const r of runs.body.runs) {
      keep(await t.call('GET', `/runs/${r.id}`, { key }));
      keep(await t.call('GET', `/runs/${r.id}/events`, { key }));
    }
  }
  const daveView = await t.call('GET', `/runs/${daveRun}`, { key: DAVE_KEY });
  assert.equal(daveView.body.outputs, [{ nodeId: 'out', name: 'Out', type: 'text', value: 'two' }], 'outputs are shown on the run itself');
  const daveList = await t.call('GET', '/runs', { key: DAVE_KEY });
  assert.ok(daveList.body.runs.some((r: Json) => r.id === daveRun && r.status === 'completed'));
  const snapshot = await fetch(`${t.base}/runs/${daveRun}/stream`, { headers: { authorization: `Bearer ${DAVE_KEY}` } });
  texts.push(await snapshot.text());
  assert.ok(texts.length > 20, `views collected: ${texts.length}`);
  assert.ok(texts.some((x) => x.includes(bobRun)) && texts.some((x) => x.includes(bobSecretRun)));

  const col = async (sql: string) => (await em.execute<{ v: string }[]>(sql)).map((r) => String(r.v)).filter((v) => v.length >= 16);
  const forbidden = [
    ...(await col('select key_hash as v from api_keys')),
    ...(await col('select ciphertext as v from run_secrets')),
    ...(await col('select ciphertext as v from provider_keys')),
    ...(await col('select secret_ciphertext as v from webhook_endpoints')),
    ...(await col('select fingerprint as v from idempotency_records')),
    ...ALL_CATALOG_SECRETS,
    PASSWORD,
  ];
  assert.ok(forbidden.length > ALL_CATALOG_SECRETS.length + 10);
  const all = texts.join('\n');
  for (const f of forbidden) assert.not.ok(all.includes(f), `a response shows ${f}`);
  for (const column of ['key_hash', 'ciphertext', 'api_key_id', 'account_id', 'cap_usd', 'fingerprint', 'compute_limit_usd', 'progress']) {
    assert.not.ok(all.includes(`"${column}"`), `a response shows the column ${column}`);
  }
  // The password input is kept out of the run row as well as out of every view.
  const [row] = await em.execute<Json[]>('select inputs from runs where id = ?', [bobSecretRun]);
  assert.is((typeof row.inputs === 'string' ? JSON.parse(row.inputs) : row.inputs).token, null);
});

// ---------------------------------------------------------------------------------------------------
// API4: unrestricted resource consumption

s('API4 bodies over 1 MiB are a 413 envelope whether or not Content-Length announces them; 1 MiB is fine', async ({ t }) => {
  const before = await countRuns(t);
  const prefix = `{"workflow":"${W.typed}","inputs":{"n":1,"title":"`;
  const suffix = '"}}';
  const exact = prefix + 'x'.repeat(MAX_BODY_BYTES - prefix.length - suffix.length) + suffix;
  assert.is(Buffer.byteLength(exact), MAX_BODY_BYTES);
  const ok = await t.call('POST', '/runs', { key: FUZZ_KEY, rawBody: exact, headers: { 'content-type': 'application/json' } });
  assert.is(ok.status, 202);
  const over = exact.replace('"title":"', '"title":"x');
  const announced = await t.call('POST', '/runs', { key: FUZZ_KEY, rawBody: over, headers: { 'content-type': 'application/json' } });
  assert.is(announced.status, 413);
  assert.is(announced.body.error.code, 'payload_too_large');
  // Chunked: no Content-Length, the limit is enforced while reading.
  const chunked = await new Promise<{ status: number; body: string }>((resolveRes, reject) => {
    const req = http.request(
      `${t.base}/runs`,
      { method: 'POST', headers: { authorization: `Bearer ${FUZZ_KEY}`, 'content-type': 'application/json', 'transfer-encoding': 'chunked' } },
      (res) => {
        let body = '';
        res.on('data', (c) => (body += c));
        res.on('end', () => resolveRes({ status: res.statusCode!, body }));
      },
    );
    req.on('error', reject);
    for (let i = 0; i < 40; i++) req.write('x'.repeat(64 * 1024));
    req.end();
  });
  assert.is(chunked.status, 413);
  assert.is(JSON.parse(chunked.body).error.code, 'payload_too_large');
  assert.is(await countRuns(t), before + 1);
});

s('API4 deep nesting is refused without a stack overflow and a flood of bad inputs gets a bounded answer', async ({ t }) => {
  const deep = '['.repeat(200_000) + ']'.repeat(200_000);
  const res = await t.call('POST', '/runs', {
    key: FUZZ_KEY,
    rawBody: `{"workflow":"${W.typed}","inputs":{"n":1,"data":${deep}}}`,
    headers: { 'content-type': 'application/json' },
  });
  assert.is(res.status, 400);
  assert.match(res.body.error.message, /nested/);
  // ~1 MiB of unknown input names: the answer names the first 100 problems, not all 100 000.
  const inputs: Record<string, number> = {};
  for (let i = 0; i < 100_000; i++) inputs[String(i)] = 0;
  const flood = await t.call('POST', '/runs', { key: FUZZ_KEY, body: { workflow: W.typed, inputs } });
  assert.is(flood.status, 400);
  assert.is(flood.body.error.code, 'invalid_inputs');
  assert.is(flood.body.error.details.length, 100);
  assert.match(flood.body.error.message, /^100001 inputs are invalid; the first 100 are listed$/);
  assert.ok(flood.text.length < 64 * 1024, `answer of ${flood.text.length} bytes`);
  assert.is((await fetch(`${t.url}/healthz`)).status, 200);
});

s('API4 one key holds at most MAX_STREAMS_PER_KEY concurrent streams; more is 429 too_many_streams until one closes', async ({ t, bobRun }) => {
  const open: Awaited<ReturnType<typeof openStream>>[] = [];
  try {
    const first = await Promise.all(Array.from({ length: MAX_STREAMS_PER_KEY }, () => openStream(t, bobRun, 'wr_test_bob')));
    open.push(...first);
    assert.ok(
      first.every((x) => x.status === 200),
      `statuses: ${[...new Set(first.map((x) => x.status))]}`,
    );
    const refused = await openStream(t, bobRun, 'wr_test_bob');
    assert.is(refused.status, 429);
    assert.is(refused.body.error.code, 'too_many_streams');
    assert.match(refused.body.error.message, /100 open streams/);
    assert.ok(Number(refused.headers.get('retry-after')) >= 1);
    assert.ok(refused.headers.get('x-request-id'));
    // The limit is per key: another key of the same account is not affected.
    const other = await openStream(t, bobRun, 'wr_test_bob_read');
    open.push(other);
    assert.is(other.status, 200);
    // Closing a stream frees its slot (the server sees the disconnect asynchronously).
    open.shift()!.close();
    let again = await openStream(t, bobRun, 'wr_test_bob');
    for (let i = 0; again.status === 429 && i < 100; i++) {
      await new Promise((r) => setTimeout(r, 20));
      again = await openStream(t, bobRun, 'wr_test_bob');
    }
    open.push(again);
    assert.is(again.status, 200);
  } finally {
    for (const x of open) x.close();
  }
  // Every slot comes back once the clients are gone.
  let last = await openStream(t, bobRun, 'wr_test_bob');
  for (let i = 0; last.status === 429 && i < 100; i++) {
    await new Promise((r) => setTimeout(r, 20));
    last = await openStream(t, bobRun, 'wr_test_bob');
  }
  last.close();
  assert.is(last.status, 200);
  // The server sees the last disconnects asynchronously: retry the full burst for a while.
  let freed = false;
  for (let i = 0; !freed && i < 50; i++) {
    const burst = await Promise.all(Array.from({ length: MAX_STREAMS_PER_KEY }, () => openStream(t, bobRun, 'wr_test_bob')));
    burst.forEach((x) => x.close());
    freed = burst.every((x) => x.status === 200);
    if (!freed) await new Promise((r) => setTimeout(r, 100));
  }
  assert.ok(freed, 'all slots were released');
});

// ---------------------------------------------------------------------------------------------------
// API5: broken function level authorization

s('API5 every operation enforces the scopes the document lists for it (any-of)', async ({ t }) => {
  const keys: [string, string[]][] = [
    ['wr_test_bob_read', ['run:read']],
    ['wr_test_bob_exec', ['run:execute']],
  ];
  let checked = 0;
  for (const op of OPERATIONS.filter((o) => o.scopes.length)) {
    for (const [key, held] of keys) {
      // A run to reschedule waits for a later start; any other run is queued at once.
      const later = new Date(Date.now() + 3_600_000).toISOString();
      const start = { workflow: W.summary, inputs: { topic: 'scope' }, ...(op.id === 'rescheduleRun' ? { startAt: later } : {}) };
      const fresh = (await t.call('POST', '/runs', { key: 'wr_test_bob', body: start })).body.run.id;
      const path = pathOf(op.template, op.template.startsWith('/workflows/') ? W.summary : fresh);
      const bodies: Record<string, unknown> = {
        startRun: { workflow: W.summary, inputs: { topic: 'scope' } },
        startRuns: { runs: [{ workflow: W.summary, inputs: { topic: 'scope' } }] },
        cancelRuns: { ids: [fresh] },
        replayRuns: { ids: [fresh] },
        rescheduleRun: { startAt: later },
      };
      const body = bodies[op.id];
      const res =
        op.id === 'streamRun'
          ? await openStream(t, fresh, key).then((x) => (x.close(), { status: x.status, body: x.body }))
          : await t.call(op.method, path, { key, body });
      const allowed = op.scopes.some((sc) => held.includes(sc));
      if (allowed) assert.ok(res.status < 400, `${key} ${op.id} → ${res.status}`);
      else {
        assert.is(res.status, 403, `${key} ${op.id}`);
        assert.is(res.body.error.code, 'insufficient_scope');
      }
      checked++;
    }
  }
  assert.ok(checked >= 20);
});

s('API5 the internal GraphQL endpoints do not accept public API keys', async ({ t }) => {
  for (const key of ['wr_test_bob', 'wr_test_alice']) {
    const res = await fetch(`${t.url}/graphql`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ query: '{ __typename }' }),
    });
    assert.is(res.status, 401);
    const stream = await fetch(`${t.url}/graphql/stream`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: '{"query":"subscription { __typename }"}',
    });
    assert.is(stream.status, 401);
  }
});

// ---------------------------------------------------------------------------------------------------
// API6: unrestricted access to sensitive business flows

s('API6 concurrent requests cannot push a key past its spend cap', async ({ t }) => {
  const price = (await t.call('GET', `/workflows/${W.daveSecret}`, { key: DAVE_CAPPED_KEY })).body.displayedRunPriceUsd as number;
  assert.ok(price > 0);
  const allowed = Math.floor(0.0005 / price + 1e-9);
  assert.ok(allowed >= 1 && allowed < 20);
  const before = await countRuns(t);
  const all = await Promise.all(Array.from({ length: 20 }, () => t.call('POST', '/runs', { key: DAVE_CAPPED_KEY, body: { workflow: W.daveSecret } })));
  assert.is(all.filter((r) => r.status === 202).length, allowed);
  assert.ok(all.filter((r) => r.status !== 202).every((r) => r.status === 402 && r.body.error.code === 'spend_cap_reached'));
  assert.is(await countRuns(t), before + allowed);
});

// ---------------------------------------------------------------------------------------------------
// API7: server side request forgery

const noDns = async (host: string): Promise<LookupAddress[]> => {
  throw new Error(`unexpected DNS lookup of ${host}`);
};
const blockedOrNot = async (url: string, lookup = noDns): Promise<'allowed' | 'blocked' | string> => {
  try {
    await assertPublicUrl(url, { allowPrivateNetwork: false, lookup });
    return 'allowed';
  } catch (e) {
    return (e as Error).name === 'BlockedAddressError' ? 'blocked' : `${(e as Error).name}: ${(e as Error).message}`;
  }
};

const PRIVATE_V4: [number, number][] = [
  [0x7f000000, 8], // loopback
  [0x0a000000, 8],
  [0xac100000, 12],
  [0xc0a80000, 16],
  [0xa9fe0000, 16], // link-local, cloud metadata
  [0x64400000, 10], // CGNAT
  [0x00000000, 8],
];
const PUBLIC_V4: [number, number][] = [
  [0x08000000, 8], // 8.0.0.0/8
  [0x5db80000, 16], // 93.184.0.0/16
  [0x97650000, 16], // 151.101.0.0/16
];
const inRange = (ranges: [number, number][]) =>
  fc.tuple(fc.constantFrom(...ranges), fc.nat()).map(([[base, bits], r]) => (base + (bits === 32 ? 0 : r % 2 ** (32 - bits))) >>> 0);

/** The same IPv4 address in the notations WHATWG URL parsing accepts in a host, and as IPv4-mapped IPv6. */
const notations = (n: number): string[] => {
  const p = [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255];
  const hex = (x: number) => `0x${x.toString(16)}`;
  return [
    p.join('.'),
    String(n),
    hex(n),
    `0X${n.toString(16).toUpperCase()}`,
    p.map((x) => `0${x.toString(8)}`).join('.'),
    p.map(hex).join('.'),
    `${p[0]}.${p[1]}.${(p[2]! << 8) | p[3]!}`,
    `${p[0]}.${n & 0xffffff}`,
    `${hex(p[0]!)}.${p[1]}.0${((p[2]! << 8) | p[3]!).toString(8)}`,
    `[::ffff:${p.join('.')}]`,
    `[::ffff:${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}]`,
    `[0:0:0:0:0:ffff:${p.join('.')}]`,
  ];
};

s('API7 private IPv4 addresses are blocked in every notation, IPv4-mapped included; public ones are not', async () => {
  await fc.assert(
    fc.asyncProperty(inRange(PRIVATE_V4), fc.constantFrom('http', 'https'), fc.constantFrom('', ':80', ':8080'), async (n, scheme, port) => {
      for (const host of notations(n)) assert.is(await blockedOrNot(`${scheme}://${host}${port}/x`), 'blocked', host);
    }),
    { numRuns: 60 },
  );
  await fc.assert(
    fc.asyncProperty(inRange(PUBLIC_V4), async (n) => {
      for (const host of notations(n)) assert.is(await blockedOrNot(`https://${host}/x`), 'allowed', host);
    }),
    { numRuns: 30 },
  );
});

s('API7 IPv6 loopback, unique-local (fc00::/7) and link-local addresses are blocked in any spelling', async () => {
  const hextet = fc.integer({ min: 0, max: 0xffff }).map((x) => x.toString(16));
  const ula = fc
    .tuple(fc.integer({ min: 0xfc00, max: 0xfdff }), fc.array(hextet, { minLength: 7, maxLength: 7 }))
    .map(([h, rest]) => [h.toString(16), ...rest].join(':'));
  const linkLocal = fc
    .tuple(fc.integer({ min: 0xfe80, max: 0xfebf }), fc.array(hextet, { minLength: 7, maxLength: 7 }))
    .map(([h, rest]) => [h.toString(16), ...rest].join(':'));
  const loopback = fc.constantFrom('::1', '0:0:0:0:0:0:0:1', '0000:0000:0000:0000:0000:0000:0000:0001', '::0:1', '0::1');
  await fc.assert(
    fc.asyncProperty(fc.oneof(ula, linkLocal, loopback), fc.boolean(), async (addr, upper) => {
      const host = upper ? addr.toUpperCase() : addr;
      assert.is(await blockedOrNot(`http://[${host}]:8080/`), 'blocked', host);
    }),
    { numRuns: 60 },
  );
});

s('API7 a host name is blocked when any address it resolves to is private (injected resolver)', async () => {
  const priv = inRange(PRIVATE_V4).map((n) => [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.'));
  const pub = inRange(PUBLIC_V4).map((n) => [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.'));
  const priv6 = fc.constantFrom('::1', 'fd00:ec2::254', 'fe80::1', '::ffff:127.0.0.1', '::ffff:10.0.0.1', 'fc00::5');
  await fc.assert(
    fc.asyncProperty(
      fc.domain(),
      fc.array(fc.oneof(pub, fc.constant('2606:4700:4700::1111')), { maxLength: 3 }),
      fc.oneof(priv, priv6),
      fc.nat(),
      async (host, publics, bad, at) => {
        const addresses = [...publics];
        addresses.splice(at % (addresses.length + 1), 0, bad);
        const lookup = async (h: string) => {
          assert.is(h, new URL(`https://${host}/`).hostname);
          return addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
        };
        assert.is(await blockedOrNot(`https://${host}/`, lookup), 'blocked', `${host} → ${addresses}`);
        if (publics.length) {
          const onlyPublic = async () => publics.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
          assert.is(await blockedOrNot(`https://${host}/`, onlyPublic), 'allowed');
        }
      },
    ),
    { numRuns: 60 },
  );
});

s('API7 http.request does not follow a redirect to a private address, in any notation', async () => {
  let hits = 0;
  const server = http.createServer((req, res) => {
    hits++;
    const to = new URL(req.url!, 'http://x').searchParams.get('to')!;
    res.writeHead(302, { location: to }).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const assertUrl = async (url: string) => {
    // The first hop is this local server; every redirect target goes through the real guard.
    if (new URL(url).origin === origin) return;
    await assertPublicUrl(url, { allowPrivateNetwork: false });
  };
  try {
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(inRange(PRIVATE_V4), fc.nat(), async (n, pick) => {
        const list = notations(n);
        const target = `http://${list[pick % list.length]}:81/latest/meta-data/`;
        const ctx: NodeExecutionContext = {
          runId: 'ssrf',
          node: { id: 'call', kind: 'http.request', url: `${origin}/r?to=${encodeURIComponent(target)}` },
          render: (x) => x,
          credentialMode: 'service_hosted',
          providers: { openai: {}, anthropic: {}, google: {}, azure_openai: {}, vertex: {}, openrouter: {} },
          allowPrivateNetwork: false,
          onDelta: () => undefined,
          signal: new AbortController().signal,
        } as NodeExecutionContext;
        const out = await executeHttpRequest(ctx, { assertUrl, timeoutMs: 3000 });
        runs++;
        assert.is(out.status, 'failed', target);
        assert.match((out as { reason: string }).reason, /private or reserved network address/, target);
      }),
      { numRuns: 25 },
    );
    assert.is(hits, runs, 'only the first hop was ever requested');
  } finally {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  }
});

s('API7 POST /runs rejects media URLs that carry credentials or are not https, before any run exists', async ({ t }) => {
  const media = (url: string) => ({ __workflowMedia: true, kind: 'image', url, mimeType: 'image/png', filename: 'a.png' });
  const before = await countRuns(t);
  const bad = fc.oneof(
    fc
      .tuple(fc.webUrl({ validSchemes: ['https'] }), fc.constantFrom('user:pass@', 'user@', ':pw@', 'a%40b:c@'))
      .map(([u, cred]) => u.replace('https://', `https://${cred}`)),
    fc
      .tuple(
        fc.webUrl({ validSchemes: ['https'] }),
        fc.constantFrom('api_key', 'apikey', 'key', 'token', 'access_token', 'Authorization', 'secret', 'password', 'API-KEY', 'bearer'),
        fc.string({ minLength: 1, maxLength: 10 }),
      )
      .map(([u, k, v]) => {
        const url = new URL(u);
        url.searchParams.append(k, v);
        return url.href;
      }),
    fc.webUrl({ validSchemes: ['http', 'ftp', 'file'] }),
  );
  await fc.assert(
    fc.asyncProperty(bad, async (url) => {
      const res = await t.call('POST', '/runs', { key: FUZZ_KEY, body: { workflow: W.typed, inputs: { n: 1, pic: media(url) } } });
      assert.is(res.status, 400, url);
      assert.is(res.body.error.code, 'invalid_inputs');
      assert.is(res.body.error.details[0].input, 'pic');
    }),
    { numRuns: 50 },
  );
  assert.is(await countRuns(t), before);
  const fine = await t.call('POST', '/runs', {
    key: FUZZ_KEY,
    body: { workflow: W.typed, inputs: { n: 1, pic: media('https://cdn.example.com/a.png?size=2') } },
  });
  assert.is(fine.status, 202);
});

// ---------------------------------------------------------------------------------------------------
// API8: security misconfiguration

s('API8 a 5xx on any operation is the bare internal_error envelope: no stack, no message, no internals', async ({ t }) => {
  const original = { fork: t.deps.orm.em.fork, getConnection: t.deps.orm.em.getConnection };
  const down = () => {
    throw new Error('connect ECONNREFUSED postgres://app:s3cret@db.internal:5432/prod at Pool.connect (/srv/app/node_modules/pg/lib/pool.js:45:11)');
  };
  // Reads outside a transaction take the connection without a fork (src/db/statement.ts outsideTransaction).
  Object.assign(t.deps.orm.em, { fork: down, getConnection: down });
  try {
    for (const op of OPERATIONS.filter((o) => o.scopes.length)) {
      const path = pathOf(op.template, op.template.startsWith('/workflows/') ? W.summary : NOT_A_RUN);
      // A body each operation reads before the database (a key kept from an earlier request skips it there too).
      const bodies: Record<string, unknown> = {
        startRun: { workflow: W.summary },
        startRuns: { runs: [{ workflow: W.summary }] },
        cancelRuns: { ids: [NOT_A_RUN] },
        replayRuns: { ids: [NOT_A_RUN] },
        rescheduleRun: { startAt: new Date(Date.now() + 3_600_000).toISOString() },
      };
      const res = await t.call(op.method, path, { key: 'wr_test_bob', body: bodies[op.id] });
      assert.is(res.status, 500, op.id);
      assert.equal(res.body, { error: { code: 'internal_error', message: 'an unexpected error occurred' } }, op.id);
      assert.is(res.headers.get('cache-control'), 'no-store');
      for (const leak of ['s3cret', 'postgres', 'ECONNREFUSED', 'node_modules', '.ts', ' at ', 'stack'])
        assert.not.ok(res.text.includes(leak), `${op.id} shows ${leak}`);
    }
    const ready = await fetch(`${t.url}/readyz`);
    assert.is(ready.status, 503);
    assert.not.ok((await ready.text()).includes('s3cret'));
  } finally {
    Object.assign(t.deps.orm.em, original);
  }
});

s('API8 every response carries X-Request-Id and API JSON is never cacheable; no CORS wildcard or banner', async ({ t, bobRun }) => {
  const probes: [string, string, Record<string, string>][] = [
    ['GET', `${t.base}/workflows`, {}],
    ['GET', `${t.base}/runs/${bobRun}`, {}],
    ['GET', `${t.base}/runs/${NOT_A_RUN}`, {}],
    ['GET', `${t.base}/runs?limit=0`, {}],
    ['DELETE', `${t.base}/runs`, {}],
    ['POST', `${t.base}/runs`, { 'content-type': 'application/json' }],
    ['GET', `${t.base}/nope`, {}],
    ['GET', `${t.url}/nope`, {}],
    ['OPTIONS', `${t.base}/runs`, { origin: 'https://evil.example', 'access-control-request-method': 'POST' }],
    ['GET', `${t.base}/workflows`, { origin: 'https://evil.example' }],
  ];
  for (const [method, url, extra] of probes) {
    const res = await fetch(url, { method, headers: { authorization: 'Bearer wr_test_bob', ...extra }, body: method === 'POST' ? '{' : undefined });
    const where = `${method} ${url} → ${res.status}`;
    assert.ok(res.headers.get('x-request-id'), where);
    assert.is(res.headers.get('cache-control'), 'no-store', where);
    assert.is(res.headers.get('access-control-allow-origin'), null, where);
    assert.is(res.headers.get('x-powered-by'), null, where);
    assert.is(res.headers.get('server'), null, where);
    assert.match(res.headers.get('content-type') ?? '', /^application\/json/, where);
    await res.arrayBuffer();
  }
  // Unauthenticated and protocol-level answers too.
  for (const url of [`${t.base}/runs`, `${t.url}/healthz`]) {
    const res = await fetch(url);
    assert.ok(res.headers.get('x-request-id'), url);
    await res.arrayBuffer();
  }
  const { hostname, port } = new URL(t.url);
  const raw = await new Promise<string>((resolveText) => {
    const sock = net.connect(Number(port), hostname, () => sock.write(`GET /v1/runs HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`));
    let buf = '';
    sock.on('data', (d) => (buf += d));
    sock.on('close', () => resolveText(buf));
    sock.on('error', () => resolveText(buf));
  });
  assert.match(raw, /^HTTP\/1\.1 431 /);
  assert.match(raw, /\r\nX-Request-Id: [0-9a-f-]{36}\r\n/i);
  assert.match(raw, /\{"error":\{"code":"invalid_request","message":"the request headers are too large"\}\}$/);
});

// ---------------------------------------------------------------------------------------------------
// API9: improper inventory management

s('API9 only the documented operations exist: other paths are 404, other methods 405, and the served document is the file', async ({ t, bobRun }) => {
  for (const path of [
    '/admin',
    '/internal',
    '/debug',
    '/api-keys',
    '/accounts',
    '/runs/' + bobRun + '/outputs',
    '/runs/' + bobRun + '/secrets',
    '/workflows/' + W.summary + '/purchase',
    '/metrics',
    '/graphql',
    '/v2/runs',
  ]) {
    const res = await t.call('GET', path, { key: 'wr_test_bob' });
    assert.is(res.status, 404, path);
    assert.is(res.body.error.code, 'not_found');
  }
  for (const prefix of ['/v0', '/v2', '/V1', '/api/v1']) {
    const res = await fetch(`${t.url}${prefix}/runs`, { headers: { authorization: 'Bearer wr_test_bob' } });
    assert.is(res.status, 404, prefix);
    await res.arrayBuffer();
  }
  for (const op of OPERATIONS) {
    const documented = Object.keys(doc.paths[op.template]).map((m) => m.toUpperCase());
    // `/runs/cancel` is also `/runs/{id}` with the id "cancel": a method that template takes is its (404, no such run).
    const shadowing = (m: string) =>
      !op.template.includes('{') && OPERATIONS.some((o) => o.method === m && o.template !== op.template && matches(o.template, op.template));
    for (const m of ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'].filter((x) => !documented.includes(x) && !shadowing(x))) {
      const res = await t.call(m, pathOf(op.template, bobRun), { key: 'wr_test_bob' });
      assert.is(res.status, 405, `${m} ${op.template}`);
    }
  }
  const served = await t.call('GET', '/openapi.json', { key: null });
  assert.equal(served.body.paths, doc.paths);
});

// ---------------------------------------------------------------------------------------------------
// API10: unsafe consumption of APIs

s('API10 webhook delivery follows no redirect and refuses names that resolve to private addresses', async ({ t }) => {
  // The app's own dispatcher would race this test's explicit delivery calls.
  await (t.deps.webhooks as unknown as WebhookDispatcher).stop();
  const hits: string[] = [];
  const target = http.createServer((req, res) => {
    hits.push(`target ${req.url}`);
    res.writeHead(200).end('ok');
  });
  await new Promise<void>((r) => target.listen(0, '127.0.0.1', r));
  const targetUrl = `http://127.0.0.1:${(target.address() as AddressInfo).port}/stolen`;
  const redirector = http.createServer((req, res) => {
    hits.push(`redirector ${req.url}`);
    req.resume();
    res.writeHead(307, { location: targetUrl }).end();
  });
  await new Promise<void>((r) => redirector.listen(0, '127.0.0.1', r));
  const redirectUrl = `http://127.0.0.1:${(redirector.address() as AddressInfo).port}/hook`;
  const em = t.deps.orm.em.fork();
  const daveId = '77777777-7777-4777-8777-777777777777';
  try {
    await em.execute('delete from webhook_deliveries where endpoint_id in (select id from webhook_endpoints where account_id = ?)', [daveId]);
    await em.execute('delete from webhook_endpoints where account_id = ?', [daveId]);
    await em.execute(
      `insert into webhook_endpoints (id, account_id, url, secret_ciphertext) values (gen_random_uuid(), ?, ?, ?), (gen_random_uuid(), ?, ?, ?)`,
      [daveId, redirectUrl, t.deps.sealer.seal(DAVE_WEBHOOK_SECRETS[0]), daveId, 'https://localhost:1/hook', t.deps.sealer.seal(DAVE_WEBHOOK_SECRETS[1])],
    );
    const [run] = await em.execute<{ id: string }[]>('select id from runs where account_id = ? limit 1', [daveId]);
    await em.transactional((tx) => enqueueRunWebhooks(tx as never, daveId, run!.id, 'run.completed'));
    const deps = (allowPrivateNetwork: boolean) => ({
      orm: t.deps.orm,
      log: t.deps.log,
      sealer: t.deps.sealer,
      config: { webhookAllowInsecure: true, allowPrivateNetwork },
    });
    // Private networks allowed (so the local redirector is reachable): the 307 is a failed attempt, not followed.
    await deliverDueWebhooks(deps(true) as never, { limit: 10 });
    const rows = await em.execute<Json[]>(
      `select e.url, d.status, d.attempts, d.last_status_code, d.last_error from webhook_deliveries d join webhook_endpoints e on e.id = d.endpoint_id where e.account_id = ?`,
      [daveId],
    );
    const redirected = rows.find((r) => r.url === redirectUrl);
    assert.is(redirected.last_status_code, 307);
    assert.is(redirected.status, 'pending', 'a redirect is retried later, like any non-2xx');
    assert.equal(hits, ['redirector /hook']);
    // With private networks blocked (the default), a name resolving to loopback is refused for good.
    await em.execute(`update webhook_deliveries set next_attempt_at = now() - interval '1 second', status = 'pending'`);
    await deliverDueWebhooks(deps(false) as never, { limit: 10 });
    const after = await em.execute<Json[]>(
      `select e.url, d.status, d.last_error from webhook_deliveries d join webhook_endpoints e on e.id = d.endpoint_id where e.account_id = ?`,
      [daveId],
    );
    for (const r of after) {
      assert.is(r.status, 'failed', r.url);
      assert.match(r.last_error, /blocked/, r.url);
    }
    assert.equal(hits, ['redirector /hook'], 'nothing more was sent');
  } finally {
    target.closeAllConnections();
    redirector.closeAllConnections();
    await new Promise((r) => target.close(r));
    await new Promise((r) => redirector.close(r));
  }
});

s.run();
