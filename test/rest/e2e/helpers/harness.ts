import { createServer, type Server } from 'node:http';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { Webhook } from 'standardwebhooks';
import { parse, stringify } from 'yaml';
import { REST_CATALOG, startTestApp, type TestApp } from '../../../helpers/app.ts';
import { countTemporal, temporalAddress } from '../../../helpers/temporal.ts';
import { E2E_ACCOUNTS, E2E_WORKFLOWS } from './catalog.ts';

/**
 * The REST end-to-end suite's harness, shared by every file of test/rest/e2e: the same scenarios run on
 * each engine available (`embedded` always, `temporal` when the test process has a Temporal server),
 * each against the real HTTP app with the engine the app builds from its own configuration
 * (ENGINE=temporal: a TemporalEngine with its in-process worker on a task queue of its own).
 */

export type EngineName = 'embedded' | 'temporal';

export interface EngineCase {
  name: EngineName;
  /** The Temporal server's address (temporal only). */
  address?: string;
  /** Generous for a Temporal round trip on a loaded machine. */
  timeoutMs: number;
}

/** Shared by the API app and a worker in another process (secrets sealed by one are opened by the other). */
export const E2E_ENCRYPTION_KEY = randomBytes(32).toString('hex');
export const WEBHOOK_SECRET = `whsec_${randomBytes(24).toString('base64')}`;
export const INTERNAL_TOKEN = 'test-internal-token-123456';

/** The engines this process can run: embedded, plus temporal when `temporalAddress` gives a server. */
export function engineCases(suite: string): EngineCase[] {
  const cases: EngineCase[] = [{ name: 'embedded', timeoutMs: 20_000 }];
  const address = temporalAddress(suite);
  if (address) cases.push({ name: 'temporal', address, timeoutMs: 60_000 });
  return cases;
}

/** Registers one scenario for one engine; the Temporal ones count toward the Temporal half's summary. */
export function scenario(engine: EngineCase, title: string, fn: () => Promise<void>): void {
  test(`[${engine.name}] ${title}`, engine.name === 'temporal' ? countTemporal(fn) : fn);
}

/** The environment that selects the engine: ENGINE=temporal with a task queue of its own. */
export function engineEnv(engine: EngineCase): Record<string, string> {
  if (engine.name === 'embedded') return { ENGINE: 'embedded' };
  return {
    ENGINE: 'temporal',
    TEMPORAL_ADDRESS: engine.address!,
    TEMPORAL_TASK_QUEUE: `rest-e2e-${randomUUID()}`,
    // On a Postgres server the API hears a worker's events over LISTEN/NOTIFY, as in production.
    ...(process.env.DATABASE_URL ? { DATABASE_URL: process.env.DATABASE_URL } : {}),
  };
}

/** The service-hosted OpenAI credentials, pointed at a local provider stub. */
export function openaiEnv(stub: { baseURLFor(p: 'openai'): string }): Record<string, string> {
  return { OPENAI_BASE_URL: stub.baseURLFor('openai'), OPENAI_API_KEY: 'sk-service-key' };
}

export interface Hook {
  headers: Record<string, string>;
  body: string;
}

export interface E2e {
  engine: EngineCase;
  t: TestApp;
  /** Every webhook delivery the local receiver got, in arrival order. */
  hooks: Hook[];
  env: Record<string, string>;
  close(): Promise<void>;
}

/**
 * The fixture catalog (test/fixtures/rest-catalog.yaml) plus the e2e accounts and workflows, with every
 * account's webhook endpoint pointing at a local receiver, and the app on `engine`.
 */
export async function startE2e(engine: EngineCase, opts: { env?: Record<string, string> } = {}): Promise<E2e> {
  const hooks: Hook[] = [];
  const receiver: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      hooks.push({ headers: req.headers as Record<string, string>, body });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const port = (receiver.address() as { port: number }).port;

  const catalog = parse(readFileSync(REST_CATALOG, 'utf8'));
  catalog.accounts.push(...E2E_ACCOUNTS);
  catalog.workflows.push(...E2E_WORKFLOWS);
  for (const a of catalog.accounts) {
    if (['alice', 'bob', 'carol', 'dave'].includes(a.handle)) a.webhooks = [{ url: `http://127.0.0.1:${port}/${a.handle}`, secret: WEBHOOK_SECRET }];
  }
  mkdirSync('.tmp', { recursive: true });
  const file = `.tmp/rest-e2e-catalog-${process.pid}-${port}.yaml`;
  writeFileSync(file, stringify(catalog));

  const env = {
    WEBHOOK_ALLOW_INSECURE: '1',
    ALLOW_PRIVATE_NETWORK: '1',
    ENCRYPTION_KEY: E2E_ENCRYPTION_KEY,
    ...engineEnv(engine),
    ...opts.env,
  };
  let t: TestApp;
  try {
    t = await startTestApp({ catalog: file, env, engine: 'app' });
  } catch (err) {
    await new Promise((r) => receiver.close(r));
    rmSync(file, { force: true });
    throw err;
  }
  return {
    engine,
    t,
    hooks,
    env,
    async close() {
      await t.close();
      receiver.closeAllConnections();
      await new Promise((r) => receiver.close(r));
      rmSync(file, { force: true });
    },
  };
}

/** Starts an app, runs `fn`, always closes it. */
export async function withE2e(engine: EngineCase, opts: { env?: Record<string, string> }, fn: (e: E2e) => Promise<void>): Promise<void> {
  const e = await startE2e(engine, opts);
  try {
    await fn(e);
  } finally {
    await e.close();
  }
}

// ---------------------------------------------------------------------------------------------------
// Probes over the public API

export const TERMINAL = ['completed', 'failed', 'cancelled'];
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function startRun(e: E2e, workflow: string, inputs: Record<string, unknown> = {}, key = 'wr_test_bob'): Promise<string> {
  const res = await e.t.call('POST', '/runs', { key, body: { workflow, inputs } });
  assert.is(res.status, 202, res.text);
  return res.body.run.id;
}

export async function getRun(e: E2e, id: string, key = 'wr_test_bob'): Promise<any> {
  const res = await e.t.call('GET', `/runs/${id}`, { key });
  assert.is(res.status, 200, res.text);
  return res.body;
}

/** Polls GET /runs/{id} until `until(run)` holds. */
export async function waitRun(e: E2e, id: string, until: (run: any) => boolean, what: string, key = 'wr_test_bob'): Promise<any> {
  const end = Date.now() + e.engine.timeoutMs;
  for (;;) {
    const run = await getRun(e, id, key);
    if (until(run)) return run;
    if (Date.now() > end) throw new Error(`[${e.engine.name}] timed out waiting for run ${id} to be ${what}; it is ${run.status}`);
    await sleep(50);
  }
}

export const settle = (e: E2e, id: string, key = 'wr_test_bob') => waitRun(e, id, (r) => TERMINAL.includes(r.status), 'terminal', key);
export const waitStatus = (e: E2e, id: string, status: string, key = 'wr_test_bob') => waitRun(e, id, (r) => r.status === status, status, key);

export interface PublicEvent {
  type: string;
  sequence: number;
  ts: string;
  nodeId: string | null;
  data: Record<string, string>;
}

/** The whole event log through GET /runs/{id}/events, page by page. */
export async function runEvents(e: E2e, id: string, key = 'wr_test_bob'): Promise<PublicEvent[]> {
  const all: PublicEvent[] = [];
  for (;;) {
    const res = await e.t.call('GET', `/runs/${id}/events?afterSequence=${all.at(-1)?.sequence ?? 0}`, { key });
    assert.is(res.status, 200, res.text);
    all.push(...res.body.events);
    if (!res.body.hasMore) return all;
  }
}

/** Event types and node ids, deltas left out: the shape both engines must produce. */
export const shape = (events: PublicEvent[]) =>
  events.filter((ev) => ev.type !== 'node.output.delta').map((ev) => `${ev.type}${ev.nodeId ? `:${ev.nodeId}` : ''}`);

/** Sequences 1..n, each node event at most once per node. */
export function assertLogSound(events: PublicEvent[]): void {
  assert.equal(
    events.map((ev) => ev.sequence),
    events.map((_, i) => i + 1),
    'sequences are 1..n without gaps',
  );
  for (const type of ['node.started', 'node.completed', 'node.failed', 'node.skipped']) {
    const ids = events.filter((ev) => ev.type === type).map((ev) => ev.nodeId);
    assert.equal(ids.length, new Set(ids).size, `each ${type} at most once per node`);
  }
}

/** The account's wallet, read from the database (the public API does not show balances). */
export async function wallet(e: E2e, handle: string): Promise<{ balance: string; held: string }> {
  const [w] = await e.t.deps.orm.em
    .fork()
    .execute<{ balance_usd: string; held_usd: string }[]>(
      'select w.balance_usd, w.held_usd from wallets w join accounts a on a.id = w.account_id where a.handle = ?',
      [handle],
    );
  return { balance: String(w!.balance_usd), held: String(w!.held_usd) };
}

export async function setWallet(e: E2e, handle: string, usd: string): Promise<void> {
  await e.t.deps.orm.em.fork().execute(`update wallets set balance_usd = ? where account_id = (select id from accounts where handle = ?)`, [usd, handle]);
}

/**
 * The webhook for `runId` of type `type`, verified with the Standard Webhooks library, with its raw body; fails
 * when none arrives in time, or when that event was delivered under more than one webhook id.
 */
export async function signedHook(e: E2e, runId: string, type: string): Promise<{ type: string; timestamp: string; data: any; raw: string }> {
  const end = Date.now() + e.engine.timeoutMs;
  for (;;) {
    const hits = e.hooks.filter((h) => {
      const body = JSON.parse(h.body);
      return body.data?.id === runId && body.type === type;
    });
    if (hits.length) {
      assert.is(new Set(hits.map((h) => h.headers['webhook-id'])).size, 1, 'one webhook id per terminal event');
      const verified = new Webhook(WEBHOOK_SECRET).verify(hits[0]!.body, hits[0]!.headers) as { type: string; timestamp: string; data: any };
      return { ...verified, raw: hits[0]!.body };
    }
    if (Date.now() > end) throw new Error(`[${e.engine.name}] no ${type} webhook for ${runId}`);
    await sleep(50);
  }
}

/** Every webhook the receiver got for a run (types), verified. */
export function hookTypes(e: E2e, runId: string): string[] {
  return e.hooks
    .filter((h) => JSON.parse(h.body).data?.id === runId)
    .map((h) => (new Webhook(WEBHOOK_SECRET).verify(h.body, h.headers) as { type: string }).type);
}

/** The credentials signal through the internal GraphQL API. */
export async function supplyCredentials(e: E2e, runId: string, provider: string, apiKey: string): Promise<{ id: string; status: string; suspended: boolean }> {
  const res = await fetch(`${e.t.url}/graphql`, {
    method: 'POST',
    headers: { authorization: `Bearer ${INTERNAL_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      query: `mutation($id: ID!, $c: [ProviderCredentialInput!]!) { supplyRunCredentials(runId: $id, credentials: $c) { id status suspended } }`,
      variables: { id: runId, c: [{ provider, apiKey }] },
    }),
  });
  const body = (await res.json()) as { data?: { supplyRunCredentials: { id: string; status: string; suspended: boolean } }; errors?: unknown };
  assert.is(res.status, 200);
  assert.is(body.errors, undefined, JSON.stringify(body.errors));
  return body.data!.supplyRunCredentials;
}

/** Watches a run until `stable` ms pass without a change of status, charge or event count. */
export async function assertStaysPut(e: E2e, id: string, ms: number): Promise<void> {
  const before = await getRun(e, id);
  const events = (await runEvents(e, id)).length;
  await sleep(ms);
  const after = await getRun(e, id);
  assert.is(after.status, before.status, 'the status never flips back');
  assert.is(after.billingStatus, before.billingStatus);
  assert.is(after.displayedChargeUsd, before.displayedChargeUsd);
  assert.is((await runEvents(e, id)).length, events, 'no event after the terminal one');
}
