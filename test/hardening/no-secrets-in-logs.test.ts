import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { parseCatalog } from '../../src/catalog/parse-catalog.ts';
import { loadCatalog } from '../../src/catalog/load-catalog.ts';
import { createLogger } from '../../src/logger.ts';
import { enqueueRunWebhooks } from '../helpers/outbox.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { startProviderStub, type ProviderStub } from '../helpers/provider-stub.ts';
import { ALL_CATALOG_SECRETS, DAVE_KEY, DAVE_PROVIDER_KEYS, loadExtraCatalog, W } from './helpers/hardening.ts';

/**
 * The service's logs, captured at debug level through createApp's `log`, never contain a secret: API
 * keys (valid or not), password inputs, provider keys, webhook secrets, the internal token. Requests
 * carrying each kind of secret are driven through success, 4xx and real 5xx paths (database errors
 * induced by breaking one SQL statement, so the driver's error carries the real query), and runs are
 * executed by the embedded engine against failing endpoints and a provider that echoes the key.
 */

const INTERNAL_TOKEN = 'test-internal-token-123456';

class LogCapture {
  readonly lines: string[] = [];
  readonly logger = createLogger('debug', { write: (line: string) => void this.lines.push(line) });
  get text(): string {
    return this.lines.join('');
  }
  messages(): string[] {
    return this.lines.map((l) => String((JSON.parse(l) as { msg?: string }).msg ?? ''));
  }
}

/** A secret and the encodings a careless log line could carry it in. */
function variants(secret: string): string[] {
  const out = new Set([
    secret,
    encodeURIComponent(secret),
    Buffer.from(secret).toString('base64'),
    Buffer.from(`${secret}:`).toString('base64'),
    JSON.stringify(secret).slice(1, -1),
  ]);
  return [...out].filter((v) => v.length >= 8);
}

function assertNoSecrets(log: LogCapture, secrets: string[]): void {
  assert.ok(log.lines.length > 0, 'nothing was logged: the capture is not wired');
  const text = log.text;
  for (const secret of secrets) {
    for (const v of variants(secret)) {
      const at = text.indexOf(v);
      assert.ok(at < 0, `the logs contain a secret (${secret}): …${text.slice(Math.max(0, at - 200), at + 60)}…`);
    }
  }
}

/** Rewrites SQL statements matching `from` for the duration of `fn`: the database then fails for real. */
async function withBrokenSql(t: TestApp, from: RegExp, to: string, fn: () => Promise<void>): Promise<number> {
  let proto = Object.getPrototypeOf(t.deps.orm.em.fork());
  while (proto && !Object.hasOwn(proto, 'execute')) proto = Object.getPrototypeOf(proto);
  const original = proto.execute;
  let hits = 0;
  proto.execute = function (this: unknown, sql: unknown, ...rest: unknown[]) {
    if (typeof sql === 'string' && from.test(sql)) {
      hits++;
      sql = sql.replace(from, to);
    }
    return original.call(this, sql, ...rest);
  };
  try {
    await fn();
  } finally {
    proto.execute = original;
  }
  return hits;
}

/** Makes every insert into `table` fail with a real database error for the duration of `fn`. */
async function withRefusedInserts(t: TestApp, table: string, fn: () => Promise<void>): Promise<void> {
  const em = t.deps.orm.em.fork();
  await em.execute(`create or replace function wr_test_refuse_insert() returns trigger language plpgsql as $$
    begin raise exception 'insert into % refused by the test', tg_table_name; end $$`);
  await em.execute(`create trigger wr_test_refuse_insert before insert on ${table} for each row execute function wr_test_refuse_insert()`);
  try {
    await fn();
  } finally {
    await em.execute(`drop trigger wr_test_refuse_insert on ${table}`);
  }
}

// ---------------------------------------------------------------------------------------------------

const r = suite<{ t: TestApp; log: LogCapture; secrets: string[] }>('no secrets in logs: requests');

r.before(async (ctx) => {
  ctx.log = new LogCapture();
  ctx.t = await startTestApp({ log: ctx.log.logger, env: { LOG_LEVEL: 'debug' } });
  await loadExtraCatalog(ctx.t);
  ctx.secrets = [...ALL_CATALOG_SECRETS, INTERNAL_TOKEN];
});
r.after(async (ctx) => ctx.t.close());

r('valid, invalid, revoked and malformed bearer keys on every kind of answer leave no key in the logs', async ({ t, log, secrets }) => {
  for (const key of [
    'wr_test_alice',
    'wr_test_bob',
    'wr_test_bob_read',
    'wr_test_carol',
    'wr_test_mallory',
    'wr_test_bob_revoked',
    'wr_test_bob_expired',
    DAVE_KEY,
  ]) {
    for (const path of ['/workflows', '/runs', `/workflows/${W.summary}`, '/runs/not-a-run', '/nowhere']) {
      await t.call('GET', path, { key });
    }
    await t.call('POST', '/runs', { key, body: { workflow: W.summary, inputs: {} } });
  }
  for (let i = 0; i < 10; i++) {
    const guess = `wr_live_${randomBytes(12).toString('hex')}`;
    secrets.push(guess);
    await t.call('GET', '/runs', { key: guess });
    await t.call('POST', '/runs', {
      key: null,
      headers: { authorization: `Basic ${Buffer.from(`${guess}:`).toString('base64')}` },
      body: { workflow: W.summary },
    });
    await t.call('GET', '/workflows', { key: null, headers: { authorization: `Bearer ${guess} trailing` } });
  }
  // The internal GraphQL token, right and wrong.
  for (const token of [INTERNAL_TOKEN, 'wr_test_bob', 'not-the-token-0123456789']) {
    const res = await fetch(`${t.url}/graphql`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: '{"query":"{ __typename }"}',
    });
    await res.arrayBuffer();
  }
  secrets.push('not-the-token-0123456789');
  assertNoSecrets(log, secrets);
});

r('password inputs on accepted, rejected and replayed runs leave no trace in the logs', async ({ t, log, secrets }) => {
  const passwords = Array.from({ length: 4 }, (_, i) => `pw-${i}-${randomBytes(10).toString('hex')}`);
  secrets.push(...passwords);
  const ok = await t.call('POST', '/runs', {
    key: DAVE_KEY,
    body: { workflow: W.typed, inputs: { n: 1, token: passwords[0] } },
    headers: { 'idempotency-key': 'logs-1' },
  });
  assert.is(ok.status, 202);
  const replay = await t.call('POST', '/runs', {
    key: DAVE_KEY,
    body: { workflow: W.typed, inputs: { n: 1, token: passwords[0] } },
    headers: { 'idempotency-key': 'logs-1' },
  });
  assert.is(replay.headers.get('idempotent-replayed'), 'true');
  const conflict = await t.call('POST', '/runs', {
    key: DAVE_KEY,
    body: { workflow: W.typed, inputs: { n: 1, token: passwords[1] } },
    headers: { 'idempotency-key': 'logs-1' },
  });
  assert.is(conflict.status, 409);
  const invalid = await t.call('POST', '/runs', { key: DAVE_KEY, body: { workflow: W.typed, inputs: { n: 'x', token: passwords[2], site: 'ftp://nope' } } });
  assert.is(invalid.status, 400);
  const badJson = await t.call('POST', '/runs', {
    key: DAVE_KEY,
    rawBody: `{"workflow":"${W.typed}","inputs":{"token":"${passwords[3]}"`,
    headers: { 'content-type': 'application/json' },
  });
  assert.is(badJson.status, 400);
  assertNoSecrets(log, secrets);
});

r('real database failures (5xx) while handling keys and passwords log the error, never the secrets', async ({ t, log, secrets }) => {
  const password = `pw-5xx-${randomBytes(10).toString('hex')}`;
  secrets.push(password);
  const before = log.lines.length;
  // Authentication itself fails: the driver error carries the real query (with the key's hash).
  // Keys found in the last second are served from the service's key cache, so let them lapse first.
  await new Promise((r) => setTimeout(r, 1100));
  const authHits = await withBrokenSql(t, /from api_keys k join accounts a/, 'from api_keys_gone k join accounts a', async () => {
    for (const key of ['wr_test_bob', DAVE_KEY, 'wr_live_guess_5f0c2e9a1b']) {
      const res = await t.call('GET', '/runs', { key });
      assert.is(res.status, 500);
    }
  });
  secrets.push('wr_live_guess_5f0c2e9a1b');
  assert.is(authHits, 3);
  // The idempotency record, the run and the sealed-secret inserts fail inside POST /runs, after the
  // password was read. They are one statement (src/sql/accept-runs.ts), so each table refuses its insert
  // in turn through a trigger: a real database error raised in the middle of that statement.
  for (const table of ['runs', 'run_secrets', 'idempotency_records']) {
    await withRefusedInserts(t, table, async () => {
      const res = await t.call('POST', '/runs', {
        key: DAVE_KEY,
        body: { workflow: W.typed, inputs: { n: 1, token: password, site: 'https://example.com' } },
        headers: { 'idempotency-key': `fail-${table}` },
      });
      assert.is(res.status, 500, table);
    });
  }
  const fresh = log.lines.slice(before).map((l) => JSON.parse(l) as { level: number; msg: string; err?: { message?: string } });
  const errors = fresh.filter((l) => l.level >= 50);
  assert.ok(errors.length >= 6, `error entries: ${errors.length}`);
  assert.ok(
    errors.some((l) => l.msg === 'request failed' && /api_keys_gone/.test(JSON.stringify(l))),
    'the auth failure is logged with its cause',
  );
  assert.ok(
    ['runs', 'run_secrets', 'idempotency_records'].every((table) =>
      errors.some((l) => l.msg === 'request failed' && JSON.stringify(l).includes(`insert into ${table} refused by the test`)),
    ),
    'each insert failure is logged with its cause',
  );
  assertNoSecrets(log, secrets);
});

r('the catalog load, the webhook dispatcher and the shutdown log nothing secret either', async ({ t, log, secrets }) => {
  assert.ok(log.messages().includes('catalog loaded'));
  assert.ok(log.messages().includes('listening'));
  // A second load of the secrets through the service's own loader, with its report logged as the app does.
  const report = await loadCatalog(
    t.deps.orm,
    parseCatalog(`accounts:\n  - handle: dave\n    providerKeys: { openai: ${DAVE_PROVIDER_KEYS.openai}-rotated }\n`, 'rotate'),
    { sealer: t.deps.sealer },
  );
  t.deps.log.info({ report }, 'catalog loaded');
  secrets.push(`${DAVE_PROVIDER_KEYS.openai}-rotated`);
  assertNoSecrets(log, secrets);
});

r.run();

// ---------------------------------------------------------------------------------------------------

const DAVE_ID = '77777777-7777-4777-8777-777777777777';
const SERVICE_OPENAI_KEY = 'sk-service-hosted-7e3b9d1f5a2c8e4b';

const ENGINE_CATALOG = `
accounts:
  - handle: erin
    id: 88888888-8888-4888-8888-888888888888
    apiKeys:
      - { secret: wr_test_erin_4b8d2f6a0c1e, scopes: [run:execute, run:read] }
workflows:
  - id: eeeeeeee-0000-4000-8000-000000000001
    owner: erin
    name: Byok chat
    runModel: free
    credentialMode: byok
    versions:
      - label: v1
        graph:
          nodes:
            - { id: ask, kind: llm.chat, provider: openai, model: gpt-4o-mini, prompt: "hello" }
            - { id: out, kind: output, from: ask }
  - id: eeeeeeee-0000-4000-8000-000000000002
    owner: erin
    name: Hosted chat
    runModel: free
    versions:
      - label: v1
        graph:
          nodes:
            - { id: ask, kind: llm.chat, provider: openai, model: gpt-4o-mini, prompt: "hello" }
            - { id: out, kind: output, from: ask }
`;

interface EngineCtx {
  t: TestApp;
  log: LogCapture;
  stub: ProviderStub;
  target: http.Server;
  targetUrl: string;
  seenAuth: string[];
}

const e = suite<EngineCtx>('no secrets in logs: runs executed by the embedded engine');

e.before(async (ctx) => {
  ctx.log = new LogCapture();
  ctx.stub = await startProviderStub({ failWith: 401 });
  ctx.seenAuth = [];
  // Answers http.request nodes and webhook deliveries with a 500 (a plain failure, retried or not).
  ctx.target = http.createServer((req, res) => {
    ctx.seenAuth.push(String(req.headers.authorization ?? req.headers['webhook-signature'] ?? ''));
    req.resume();
    req.on('end', () => res.writeHead(500, { 'content-type': 'text/plain' }).end('upstream exploded'));
  });
  await new Promise<void>((r) => ctx.target.listen(0, '127.0.0.1', r));
  ctx.targetUrl = `http://127.0.0.1:${(ctx.target.address() as AddressInfo).port}`;
  ctx.t = await startTestApp({
    log: ctx.log.logger,
    env: {
      LOG_LEVEL: 'debug',
      ALLOW_PRIVATE_NETWORK: '1',
      WEBHOOK_ALLOW_INSECURE: '1',
      OPENAI_API_KEY: SERVICE_OPENAI_KEY,
      OPENAI_BASE_URL: ctx.stub.baseURLFor('openai'),
    },
    engine: async (deps) => {
      const { EmbeddedEngine } = await import('../../src/engine/embedded/embedded-engine.ts');
      return new EmbeddedEngine(deps, { sweepIntervalMs: 100 });
    },
  });
  await loadExtraCatalog(ctx.t);
  await loadCatalog(ctx.t.deps.orm, parseCatalog(ENGINE_CATALOG, 'logs-engine'), { sealer: ctx.t.deps.sealer });
  // dave's webhooks point at the failing target, so deliveries run (and fail) during the test.
  await ctx.t.deps.orm.em.fork().execute(`update webhook_endpoints set url = ? || '/hook/' || id where account_id = ?`, [ctx.targetUrl, DAVE_ID]);
});
e.after(async (ctx) => {
  await ctx.t.close();
  await ctx.stub.close();
  ctx.target.closeAllConnections();
  await new Promise((r) => ctx.target.close(r));
});

/** Waits until the run's event log shows `nodeId` finished (completed or failed): its secret has been used. */
async function waitStepDone(t: TestApp, runId: string, key: string, nodeId: string): Promise<{ type: string; data: Record<string, string> }> {
  const until = Date.now() + 20_000;
  for (;;) {
    const res = await t.call('GET', `/runs/${runId}/events`, { key });
    const done = res.body.events.find(
      (ev: { type: string; nodeId: string | null }) => ev.nodeId === nodeId && (ev.type === 'node.failed' || ev.type === 'node.completed'),
    );
    if (done) return done;
    if (Date.now() > until) assert.unreachable(`step ${nodeId} of run ${runId} did not finish: ${res.text.slice(0, 1500)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

e('failing http.request steps with a password header, provider errors echoing the key and failing webhooks log no secret', async (ctx) => {
  const { t, log } = ctx;
  const password = `pw-engine-${randomBytes(10).toString('hex')}`;
  const start = async (body: unknown) => {
    const res = await t.call('POST', '/runs', { key: DAVE_KEY, body });
    assert.is(res.status, 202, res.text);
    return res.body.run.id as string;
  };
  const httpRun = await start({ workflow: W.typed, inputs: { n: 1, token: password, site: `${ctx.targetUrl}/api` } });
  const byokRun = await start({ workflow: 'eeeeeeee-0000-4000-8000-000000000001' });
  const hostedRun = await start({ workflow: 'eeeeeeee-0000-4000-8000-000000000002' });
  // The steps that carry the secrets fail: the target answers 500, the provider 401 (echoing the key).
  const failures = [
    await waitStepDone(t, httpRun, DAVE_KEY, 'call'),
    await waitStepDone(t, byokRun, DAVE_KEY, 'ask'),
    await waitStepDone(t, hostedRun, DAVE_KEY, 'ask'),
  ];
  for (const f of failures) assert.is(f.type, 'node.failed', JSON.stringify(f));
  // The secrets really went out: the password in the request header, both keys to the provider.
  assert.ok(ctx.seenAuth.includes(`Bearer ${password}`), `target saw: ${ctx.seenAuth}`);
  const providerAuth = ctx.stub.requests.map((q) => String(q.headers.authorization ?? ''));
  assert.ok(providerAuth.includes(`Bearer ${DAVE_PROVIDER_KEYS.openai}`), 'the BYOK key was used');
  assert.ok(providerAuth.includes(`Bearer ${SERVICE_OPENAI_KEY}`), 'the service key was used');
  // A terminal-run webhook for dave's endpoints (signed with their secrets) fails at the target.
  await t.deps.orm.em.fork().transactional((tx) => enqueueRunWebhooks(tx as never, DAVE_ID, httpRun, 'run.failed'));
  t.deps.webhooks?.notify();
  const until = Date.now() + 10_000;
  while (!log.messages().includes('webhook delivery failed') && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
  assert.ok(log.messages().includes('webhook delivery failed'), `messages: ${[...new Set(log.messages())]}`);
  assert.ok(
    ctx.seenAuth.some((a) => a.startsWith('v1,')),
    'a signed delivery reached the target',
  );
  assertNoSecrets(log, [...ALL_CATALOG_SECRETS, password, SERVICE_OPENAI_KEY, INTERNAL_TOKEN, 'wr_test_erin_4b8d2f6a0c1e']);
  // Nor do the run's events, which carry the step failures.
  for (const id of [httpRun, byokRun, hostedRun]) {
    const events = await t.call('GET', `/runs/${id}/events`, { key: DAVE_KEY });
    for (const secret of [password, DAVE_PROVIDER_KEYS.openai, SERVICE_OPENAI_KEY])
      assert.not.ok(events.text.includes(secret), `events of ${id} show ${secret}`);
  }
});

e.run();
