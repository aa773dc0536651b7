import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { messagesWhile } from '../helpers/round-trips.ts';
import { workflowReadCache } from '../../src/runs/workflow-cache.ts';

/**
 * POST /runs keeps a caller's workflow read for a while (src/runs/workflow-cache.ts): a request
 * that finds it kept sends only its count in its key's rate window and the acceptance, and the acceptance is fenced on the read's view token, so a workflow changed since is never run
 * on the old view.
 */

const W_SUMMARY = 'aaaaaaaa-0000-4000-8000-000000000001';
const V1 = 'aaaaaaaa-0000-4000-8000-0000000000a1';
const V2 = 'aaaaaaaa-0000-4000-8000-0000000000a2';
const CAROL = '33333333-3333-4333-8333-333333333333';
const SERVER = Boolean(process.env.DATABASE_URL);

const t = suite<{ t: TestApp }>('POST /runs on a kept workflow read');
t.before(async (ctx) => {
  ctx.t = await startTestApp();
});
t.after(async (ctx) => ctx.t.close());

const sql = <T = any>(t: TestApp, text: string, params: unknown[] = []) => t.deps.orm.em.fork().execute<T[]>(text, params);
const run = (t: TestApp, key: string, headers: Record<string, string> = {}) =>
  t.call('POST', '/runs', { key, body: { workflow: W_SUMMARY, inputs: { topic: 'kept' } }, headers });

/** The messages that carry POST /runs's own statements (the engine runs accepted runs meanwhile), PREPAREs (once per connection) aside. */
const postRunsMessages = (messages: string[]) =>
  messages.filter((m) => /\b(find_workflow_to_run|accept_runs|count_requests)(_b)?\b/.test(m) && !/^(begin; )?prepare /.test(m));

t('on a Postgres server a request whose workflow read is kept reaches Postgres in two messages: its count, then the acceptance', async ({ t }) => {
  if (!SERVER) {
    console.log('  (skipped on PGlite: no messages, and the limiter is in memory)');
    return;
  }
  // Read afresh first (an earlier suite of this process may have left the read kept).
  workflowReadCache(t.deps.orm).drop(CAROL, W_SUMMARY);
  const first = await messagesWhile(() => run(t, 'wr_test_carol'));
  assert.is(first.result.status, 202);
  assert.is(postRunsMessages(first.messages).length, 3, postRunsMessages(first.messages).join('\n'));
  // A few more so that whichever pooled connection serves the request has the statements prepared.
  for (let i = 0; i < 3; i++) assert.is((await run(t, 'wr_test_carol')).status, 202);
  const kept = await messagesWhile(() => run(t, 'wr_test_carol', { 'idempotency-key': 'kept-one-message' }));
  assert.is(kept.result.status, 202);
  assert.is(kept.result.headers.get('ratelimit-limit'), '60');
  const sent = postRunsMessages(kept.messages);
  assert.is(sent.length, 2, sent.join('\n'));
  assert.match(sent[0]!, /\bcount_requests\b/);
  assert.match(sent[1]!, /\baccept_runs\b/);
  const replay = await run(t, 'wr_test_carol', { 'idempotency-key': 'kept-one-message' });
  assert.is(replay.status, 202);
  assert.is(replay.body.run.id, kept.result.body.run.id);
  assert.is(replay.headers.get('idempotent-replayed'), 'true');
});

t('a workflow changed after its read was kept is never run on the old view: the request gets the answer of a fresh read', async ({ t }) => {
  const carol = 'wr_test_carol';
  const runRow = async (id: string) => (await sql(t, 'select version_id, creator_price_usd::text as price, user_access from runs where id = ?', [id]))[0];
  // The price.
  assert.is((await run(t, carol)).status, 202);
  await sql(t, 'update workflows set price_usd = 0.5 where id = ?', [W_SUMMARY]);
  const priced = await run(t, carol);
  assert.is(priced.status, 202);
  assert.is(Number((await runRow(priced.body.run.id)).price), 0.5);
  // The active version.
  await sql(t, 'update workflows set active_version_id = ? where id = ?', [V1, W_SUMMARY]);
  const versioned = await run(t, carol);
  assert.is(versioned.status, 202);
  assert.is((await runRow(versioned.body.run.id)).version_id, V1);
  await sql(t, 'update workflows set active_version_id = ? where id = ?', [V2, W_SUMMARY]);
  assert.is((await runRow((await run(t, carol)).body.run.id)).version_id, V2);
  // API access turned off, then on again: a refusal is not kept either.
  await sql(t, 'update workflows set api_access = false where id = ?', [W_SUMMARY]);
  const noApi = await run(t, carol);
  assert.is(noApi.status, 403, JSON.stringify(noApi.body));
  await sql(t, 'update workflows set api_access = true where id = ?', [W_SUMMARY]);
  assert.is((await run(t, carol)).status, 202);
  // The owner's listings paused.
  await sql(t, `update accounts set listings_paused = true where handle = 'alice'`);
  const paused = await run(t, carol);
  assert.is(paused.status, 403);
  assert.is(paused.body.error.code, 'creator_listings_paused');
  await sql(t, `update accounts set listings_paused = false where handle = 'alice'`);
  assert.is((await run(t, carol)).status, 202);
  // Bob's purchase removed: he now runs the active version at the wallet price.
  const pinned = await run(t, 'wr_test_bob');
  assert.is(pinned.status, 202);
  assert.equal(await runRow(pinned.body.run.id), { version_id: V1, price: '0.000000', user_access: 'purchased' });
  await sql(t, `delete from purchases where account_id = (select id from accounts where handle = 'bob') and workflow_id = ?`, [W_SUMMARY]);
  const unpinned = await run(t, 'wr_test_bob');
  assert.is(unpinned.status, 202);
  assert.equal(await runRow(unpinned.body.run.id), { version_id: V2, price: '0.500000', user_access: 'wallet' });
  // The listing made private: no longer visible to Carol, and the request was counted.
  await sql(t, `update workflows set listing = 'none' where id = ?`, [W_SUMMARY]);
  const hidden = await run(t, carol);
  assert.is(hidden.status, 404);
  assert.ok(Number(hidden.headers.get('ratelimit-remaining')) < 60);
  await sql(t, `update workflows set listing = 'public' where id = ?`, [W_SUMMARY]);
});

t('a request refused by the rate limit on a kept read writes no run and no idempotency record', async ({ t }) => {
  const slow = 'wr_test_bob_slow'; // 3 per minute
  assert.is((await run(t, slow)).status, 202);
  assert.is((await run(t, slow)).status, 202);
  assert.is((await run(t, slow)).status, 202);
  const runs = async () => Number((await sql(t, 'select count(*)::int as n from runs'))[0].n);
  const before = await runs();
  const refused = await messagesWhile(() => run(t, slow, { 'idempotency-key': 'refused-on-a-kept-read' }));
  assert.is(refused.result.status, 429);
  assert.ok(Number(refused.result.headers.get('retry-after')) >= 1);
  if (SERVER) assert.not.match(postRunsMessages(refused.messages).join('\n'), /accept_run/, 'the count refused it before any acceptance');
  assert.is(await runs(), before);
  const [rec] = await sql(t, `select count(*)::int as n from idempotency_records where key = 'refused-on-a-kept-read'`);
  assert.is(Number(rec.n), 0);
});

t('a spend cap reached on a kept read answers 402 with the rate headers of the request', async ({ t }) => {
  const capped = 'wr_test_bob_capped'; // $0.50 a day
  // Without a purchase Bob pays the wallet price, so the second run does not fit.
  await sql(t, `delete from purchases where account_id = (select id from accounts where handle = 'bob') and workflow_id = ?`, [W_SUMMARY]);
  await sql(t, 'update workflows set price_usd = 0.4 where id = ?', [W_SUMMARY]);
  let answer = await run(t, capped);
  let remaining = Number(answer.headers.get('ratelimit-remaining'));
  for (let i = 0; i < 5 && answer.status === 202; i++) {
    remaining = Number(answer.headers.get('ratelimit-remaining'));
    answer = await run(t, capped);
  }
  assert.is(answer.status, 402, JSON.stringify(answer.body));
  assert.is(answer.body.error.code, 'spend_cap_reached');
  assert.is(answer.headers.get('ratelimit-limit'), '60');
  // Counted once: the hit that went with the failed acceptance is the one the headers show.
  assert.is(Number(answer.headers.get('ratelimit-remaining')), remaining - 1);
});

t.run();
