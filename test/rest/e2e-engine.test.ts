import { createServer, type Server } from 'node:http';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { Webhook } from 'standardwebhooks';
import { EmbeddedEngine } from '../../src/engine/embedded/embedded-engine.ts';
import { REST_CATALOG, startTestApp, type TestApp } from '../helpers/app.ts';

/**
 * The spec's transition table over real HTTP with the embedded engine: completion (bundle-funded and
 * wallet-funded), insufficient funds, cancellation, each ending in a signed webhook verified with the
 * Standard Webhooks library.
 */

const W_SUMMARY = 'aaaaaaaa-0000-4000-8000-000000000001';
const W_FREE = 'aaaaaaaa-0000-4000-8000-000000000002';
const secret = `whsec_${randomBytes(24).toString('base64')}`;

interface Ctx {
  t: TestApp;
  hooks: { headers: Record<string, string>; body: string }[];
  receiver: Server;
}
const t = suite<Ctx>('end to end with the embedded engine');

t.before(async (ctx) => {
  ctx.hooks = [];
  ctx.receiver = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      ctx.hooks.push({ headers: req.headers as Record<string, string>, body });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => ctx.receiver.listen(0, '127.0.0.1', r));
  const port = (ctx.receiver.address() as { port: number }).port;
  // The fixture catalog plus webhook endpoints for bob and carol pointing at the local receiver.
  const yaml = readFileSync(REST_CATALOG, 'utf8')
    .replace(/(  - handle: bob\n)/, `$1    webhooks:\n      - { url: "http://127.0.0.1:${port}/bob", secret: "${secret}" }\n`)
    .replace(/(  - handle: carol\n)/, `$1    webhooks:\n      - { url: "http://127.0.0.1:${port}/carol", secret: "${secret}", events: [run.failed] }\n`);
  mkdirSync('.tmp', { recursive: true });
  const file = `.tmp/e2e-catalog-${process.pid}.yaml`;
  writeFileSync(file, yaml);
  ctx.t = await startTestApp({
    catalog: file,
    env: { WEBHOOK_ALLOW_INSECURE: '1', ALLOW_PRIVATE_NETWORK: '1' },
    engine: (deps) => new EmbeddedEngine(deps),
  });
});
t.after(async (ctx) => {
  await ctx.t.close();
  await new Promise((r) => ctx.receiver.close(r));
});

async function settle(t: TestApp, id: string, key = 'wr_test_bob'): Promise<any> {
  const end = Date.now() + 15_000;
  for (;;) {
    const run = (await t.call('GET', `/runs/${id}`, { key })).body;
    if (['completed', 'failed', 'cancelled'].includes(run.status) || Date.now() > end) return run;
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function hookFor(ctx: Ctx, runId: string): Promise<{ type: string; data: any }> {
  const end = Date.now() + 10_000;
  for (;;) {
    const hit = ctx.hooks.find((h) => JSON.parse(h.body).data.id === runId);
    if (hit) return new Webhook(secret).verify(hit.body, hit.headers) as { type: string; data: any };
    if (Date.now() > end) throw new Error(`no webhook for ${runId}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

t('a bundle-funded run completes with outputs, the bundle price and a signed run.completed webhook', async (ctx) => {
  const { t } = ctx;
  const res = await t.call('POST', '/runs', { body: { workflow: W_SUMMARY, inputs: { topic: 'owls' } } });
  const run = await settle(t, res.body.run.id);
  assert.is(run.status, 'completed');
  assert.is(run.outcome, 'completed');
  assert.is(run.billingStatus, 'settled');
  assert.is(run.displayedChargeUsd, 0.2);
  assert.equal(run.outputs, [{ nodeId: 'out', name: 'Summary', type: 'text', value: 'About owls' }]);
  const events = (await t.call('GET', `/runs/${run.id}/events`)).body.events;
  assert.equal(events.slice(0, 3).map((e: any) => e.type), ['run.queued', 'run.preparing', 'run.started']);
  assert.is(events.at(-1).type, 'run.completed');
  const text = events.filter((e: any) => e.type === 'node.output.delta' && e.nodeId === 'say').map((e: any) => e.data.text).join('');
  assert.is(text, 'About owls');
  const hook = await hookFor(ctx, run.id);
  assert.is(hook.type, 'run.completed');
  assert.equal(hook.data, run);
});

t('a wallet run is charged the creator price plus its steps, exactly', async ({ t }) => {
  await t.deps.orm.em.fork().execute(`update wallets set balance_usd = 1 where account_id = (select id from accounts where handle = 'carol')`);
  const res = await t.call('POST', '/runs', { key: 'wr_test_carol', body: { workflow: W_SUMMARY, inputs: { topic: 'bees' } } });
  const run = await settle(t, res.body.run.id, 'wr_test_carol');
  assert.is(run.status, 'completed');
  assert.is(run.displayedChargeUsd, 0.2502);
  assert.equal(run.outputs[0].value, '3 points about bees (formal)!');
  const [w] = await t.deps.orm.em.fork().execute<any[]>(`select balance_usd, held_usd from wallets where account_id = (select id from accounts where handle = 'carol')`);
  assert.equal(w, { balance_usd: '0.749800', held_usd: '0.000000' });
});

t('insufficient funds: 202, then failed and not charged, with a run.failed webhook', async (ctx) => {
  const { t } = ctx;
  await t.deps.orm.em.fork().execute(`update wallets set balance_usd = 0.0001 where account_id = (select id from accounts where handle = 'carol')`);
  const res = await t.call('POST', '/runs', { key: 'wr_test_carol', body: { workflow: W_SUMMARY, inputs: { topic: 'x' } } });
  assert.is(res.status, 202);
  const run = await settle(t, res.body.run.id, 'wr_test_carol');
  assert.is(run.status, 'failed');
  assert.match(run.reason, /insufficient funds/);
  assert.is(run.billingStatus, 'not_charged');
  assert.is(run.displayedChargeUsd, null);
  const hook = await hookFor(ctx, run.id);
  assert.is(hook.type, 'run.failed');
});

t('cancelling a running run sends run.cancelled and the run stays cancelled', async (ctx) => {
  const { t } = ctx;
  // A run of the typed workflow blocks on its http.request to a server that never answers.
  const hang = createServer(() => undefined);
  await new Promise<void>((r) => hang.listen(0, '127.0.0.1', r));
  const site = `http://127.0.0.1:${(hang.address() as { port: number }).port}/slow`;
  try {
    const res = await t.call('POST', '/runs', { body: { workflow: W_FREE, inputs: { n: 1, site, token: 'tok' } } });
    const id = res.body.run.id;
    const end = Date.now() + 10_000;
    while ((await t.call('GET', `/runs/${id}`)).body.status !== 'running' && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
    const cancel = await t.call('POST', `/runs/${id}/cancel`);
    assert.equal(cancel.body, { id, status: 'cancelled', cancelRequested: true });
    const hook = await hookFor(ctx, id);
    assert.is(hook.type, 'run.cancelled');
    await new Promise((r) => setTimeout(r, 300));
    const run = (await t.call('GET', `/runs/${id}`)).body;
    assert.is(run.status, 'cancelled');
    assert.is(run.billingStatus, 'not_charged');
  } finally {
    hang.closeAllConnections();
    hang.close();
  }
});

t.run();
