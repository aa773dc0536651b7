import { randomUUID } from 'node:crypto';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { hashApiKey } from '../../src/security/crypto.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { cloneRun } from '../helpers/cloned-runs.ts';

/**
 * POST /runs/cancel and POST /runs/replay over HTTP on runs that stay queued (no engine):
 * docs/design/runs-in-sets.md. The engines' part (running and suspended runs, Temporal workflows closed
 * as Canceled) is test/rest/e2e/runs-in-sets.test.ts.
 */

const W_SUMMARY = 'aaaaaaaa-0000-4000-8000-000000000001';
const W_TYPED = 'aaaaaaaa-0000-4000-8000-000000000002';
const BOB = 'wr_test_bob';
const CAROL = 'wr_test_carol';

const t = suite<{ t: TestApp }>('runs in sets: cancel and replay');
t.before(async (ctx) => {
  ctx.t = await startTestApp();
});
t.after(async (ctx) => ctx.t.close());

async function start(t: TestApp, body: Record<string, unknown>, key = BOB): Promise<string> {
  const res = await t.call('POST', '/runs', { key, body });
  assert.is(res.status, 202, res.text);
  return res.body.run.id;
}

const status = async (t: TestApp, id: string) => (await t.call('GET', `/runs/${id}`, { key: BOB })).body;

t("by ids: each id answered (cancelled, already_terminal, not_found for unknown ids and other accounts' runs); nothing charged", async ({ t }) => {
  const a = await start(t, { workflow: W_SUMMARY, inputs: { topic: 'a' } });
  const b = await start(t, { workflow: W_SUMMARY, inputs: { topic: 'b' } });
  assert.is((await t.call('POST', `/runs/${b}/cancel`, { key: BOB })).status, 200);
  const carols = await start(t, { workflow: W_SUMMARY, inputs: { topic: 'c' } }, CAROL);
  const unknown = randomUUID();
  const res = await t.call('POST', '/runs/cancel', { key: BOB, body: { ids: [a, b, unknown, carols, 'not-a-uuid'] } });
  assert.is(res.status, 200, res.text);
  assert.equal(res.body, {
    dryRun: false,
    matched: 2,
    cancelled: 1,
    alreadyTerminal: 1,
    results: [
      { id: a, outcome: 'cancelled' },
      { id: b, outcome: 'already_terminal' },
      { id: unknown, outcome: 'not_found' },
      { id: carols, outcome: 'not_found' },
      { id: 'not-a-uuid', outcome: 'not_found' },
    ],
  });
  const run = await status(t, a);
  assert.is(run.status, 'cancelled');
  assert.is(run.billingStatus, 'not_charged');
  assert.is((await t.call('GET', `/runs/${carols}`, { key: CAROL })).body.status, 'pending', "another account's run is untouched");
  const events = (await t.call('GET', `/runs/${a}/events`, { key: BOB })).body.events.map((e: { type: string }) => e.type);
  assert.equal(events, ['run.queued', 'run.cancelled'], 'the same log as a single cancel');
  const again = await t.call('POST', '/runs/cancel', { key: BOB, body: { ids: [a] } });
  assert.equal(again.body.results, [{ id: a, outcome: 'already_terminal' }], 'idempotent');
});

t('by metadata filter: a dry run counts and changes nothing; then every match is cancelled, page after page with the cursor', async ({ t }) => {
  const batch = randomUUID();
  const first = await start(t, { workflow: W_SUMMARY, inputs: { topic: 'x' }, metadata: { batch } });
  await cloneRun(t.deps.orm, first, 1_004);
  const other = await start(t, { workflow: W_SUMMARY, inputs: { topic: 'y' }, metadata: { batch: 'other' } });
  const filter = { metadata: { batch }, status: ['pending'] };

  const dry = await t.call('POST', '/runs/cancel?dryRun=true', { key: BOB, body: { filter } });
  assert.is(dry.status, 200, dry.text);
  assert.is(dry.body.dryRun, true);
  assert.is(dry.body.matched, 1_000, 'one call takes at most 1,000');
  assert.is(dry.body.cancelled, 1_000);
  assert.type(dry.body.nextCursor, 'string');
  assert.is((await status(t, first)).status, 'pending', 'a dry run writes nothing');

  const page1 = await t.call('POST', '/runs/cancel', { key: BOB, body: { filter } });
  assert.equal([page1.body.matched, page1.body.cancelled, page1.body.alreadyTerminal], [1_000, 1_000, 0]);
  const page2 = await t.call('POST', '/runs/cancel', { key: BOB, body: { filter, cursor: page1.body.nextCursor } });
  assert.is(page2.status, 200, page2.text);
  assert.equal([page2.body.matched, page2.body.cancelled, page2.body.nextCursor], [5, 5, null]);
  const left = await t.deps.orm.em.fork().execute(`select count(*)::int as n from runs where metadata->>'batch' = ? and status <> 'cancelled'`, [batch]);
  assert.is(left[0].n, 0, 'all 1,005 cancelled');
  const charged = await t.deps.orm.em
    .fork()
    .execute(`select count(*)::int as n from runs where metadata->>'batch' = ? and billing_status <> 'not_charged'`, [batch]);
  assert.is(charged[0].n, 0, 'none charged');
  assert.is((await status(t, other)).status, 'pending', 'a run the filter does not match is untouched');

  const otherFilter = await t.call('POST', '/runs/cancel', { key: BOB, body: { filter: { metadata: { batch: 'other' } }, cursor: page1.body.nextCursor } });
  assert.is(otherFilter.status, 400);
  assert.is(otherFilter.body.error.code, 'invalid_cursor', 'a cursor continues the filter it came from only');
});

t('bad bodies are 400 invalid_request (or invalid_json), never a 500', async ({ t }) => {
  const refused = async (body: unknown, code = 'invalid_request') => {
    const res = await t.call('POST', '/runs/cancel', {
      key: BOB,
      ...(typeof body === 'string' ? { rawBody: body, headers: { 'content-type': 'application/json' } } : { body }),
      unchecked: true,
    });
    assert.is(res.status, 400, `${JSON.stringify(body)}: ${res.text}`);
    assert.is(res.body.error.code, code);
  };
  await refused({ filter: {} });
  await refused({});
  await refused({ ids: [] });
  await refused({ ids: Array.from({ length: 1_001 }, () => randomUUID()) });
  await refused({ ids: [randomUUID()], filter: { status: ['pending'] } });
  await refused({ filter: { status: ['suspended'] } });
  await refused({ filter: { workflow: 'x' } });
  await refused({ filter: { createdAfter: 'yesterday' } });
  await refused({ filter: { colour: 'red' } });
  await refused({ filter: { status: ['pending'] }, cursor: 'nope' }, 'invalid_cursor');
  await refused('{', 'invalid_json');
  const readOnly = await t.call('POST', '/runs/cancel', { key: 'wr_test_bob_read', body: { filter: { status: ['pending'] } } });
  assert.is(readOnly.status, 403);
});

t('replay: a new run of the same workflow, version, inputs and metadata, with replayOf; passwords must be given again', async ({ t }) => {
  const original = await start(t, { workflow: W_TYPED, inputs: { n: 7, Token: 'first-secret', title: 'hello' }, metadata: { team: 'ops' } });
  const refused = await t.call('POST', `/runs/${original}/replay`, { key: BOB, body: {} });
  assert.is(refused.status, 400, refused.text);
  assert.is(refused.body.error.code, 'invalid_inputs');
  assert.equal(
    refused.body.error.details.map((d: { input: string }) => d.input),
    ['token'],
    'names the password input',
  );

  const res = await t.call('POST', `/runs/${original}/replay`, { key: BOB, body: { inputs: { Token: 'second-secret', n: 8 } } });
  assert.is(res.status, 202, res.text);
  const replay = await status(t, res.body.run.id);
  const before = await status(t, original);
  assert.is(replay.replayOf, original);
  assert.is(replay.workflowId, W_TYPED);
  assert.is(replay.workflowVersionId, before.workflowVersionId);
  assert.equal(replay.metadata, { team: 'ops' });
  const [row] = await t.deps.orm.em.fork().execute('select inputs from runs where id = ?', [replay.id]);
  const inputs = typeof row.inputs === 'string' ? JSON.parse(row.inputs) : row.inputs;
  assert.is(inputs.n, 8, 'an override wins');
  assert.is(inputs.title, 'hello', 'the rest is the original');
  assert.is(inputs.token, null, 'a password is sealed, never in the inputs');
  assert.is(before.replayOf, undefined, 'a run not replayed shows no replayOf');

  const key = `replay-${randomUUID()}`;
  const body = { inputs: { token: 'x' }, metadata: { team: 'other' } };
  const once = await t.call('POST', `/runs/${original}/replay`, { key: BOB, body, headers: { 'Idempotency-Key': key } });
  const twice = await t.call('POST', `/runs/${original}/replay`, { key: BOB, body, headers: { 'Idempotency-Key': key } });
  assert.is(once.status, 202);
  assert.is(twice.body.run.id, once.body.run.id, 'the same key answers the same run');
  assert.is(twice.headers.get('idempotent-replayed'), 'true');
  assert.equal((await status(t, once.body.run.id)).metadata, { team: 'other' });

  assert.is((await t.call('POST', `/runs/${randomUUID()}/replay`, { key: BOB, body: {} })).status, 404);
  assert.is((await t.call('POST', `/runs/${original}/replay`, { key: CAROL, body: {} })).status, 404, "another account's run is unknown");
});

t("replay by filter and by ids: one item per run in order, refusals with the single replay's code", async ({ t }) => {
  const tag = randomUUID();
  const a = await start(t, { workflow: W_SUMMARY, inputs: { topic: 'a' }, metadata: { tag } });
  const b = await start(t, { workflow: W_SUMMARY, inputs: { topic: 'b' }, metadata: { tag } });
  const res = await t.call('POST', '/runs/replay', { key: BOB, body: { filter: { metadata: { tag } } } });
  assert.is(res.status, 200, res.text);
  assert.is(res.body.accepted, 2);
  assert.is(res.body.refused, 0);
  assert.is(res.body.nextCursor, null);
  const replayed = await Promise.all(res.body.items.map(async (i: { run: { id: string } }) => (await status(t, i.run.id)).replayOf));
  assert.equal(replayed, [b, a], 'newest first, as the list');

  const typed = await start(t, { workflow: W_TYPED, inputs: { n: 1, token: 's' } });
  const unknown = randomUUID();
  const byIds = await t.call('POST', '/runs/replay', { key: BOB, body: { ids: [a, unknown, typed] } });
  assert.is(byIds.status, 200, byIds.text);
  assert.equal([byIds.body.accepted, byIds.body.refused], [1, 2]);
  assert.is(byIds.body.items[0].index, 0);
  assert.ok(byIds.body.items[0].run.id);
  assert.equal(byIds.body.items[1], { index: 1, error: { code: 'not_found', message: 'run not found' } });
  assert.is(byIds.body.items[2].error.code, 'invalid_inputs');
});

t("replays draw on the key's run budget as a batch's items: a set it cannot hold is refused whole with 429", async ({ t }) => {
  const key = 'wr_test_bob_exec';
  const sql = <T = any>(text: string, params: unknown[] = []) => t.deps.orm.em.fork().execute<T[]>(text, params);
  await sql('update api_keys set run_budget_per_minute = 3 where key_hash = ?', [hashApiKey(key)]);
  // The key as authenticated is kept a second.
  await new Promise((r) => setTimeout(r, 1100));
  const tag = randomUUID();
  const ids: string[] = [];
  for (const topic of ['r1', 'r2', 'r3', 'r4']) ids.push(await start(t, { workflow: W_SUMMARY, inputs: { topic }, metadata: { tag } }));
  const runCount = async () => Number((await sql('select count(*)::int as n from runs'))[0].n);
  const before = await runCount();
  const over = await t.call('POST', '/runs/replay', { key, body: { filter: { metadata: { tag } } } });
  assert.is(over.status, 429, over.text);
  assert.is(over.body.error.code, 'rate_limited');
  assert.match(over.body.error.message, /run budget of 3/);
  assert.is(await runCount(), before, 'nothing written');

  const fits = await t.call('POST', '/runs/replay', { key, body: { ids: ids.slice(0, 2) } });
  assert.is(fits.status, 200, fits.text);
  assert.is(fits.body.accepted, 2);
  assert.is(fits.headers.get('ratelimit-policy'), '"requests";q=60;w=60, "runs";q=3;w=60');
  // Written by the acceptance itself: present as soon as the answer is.
  const rows = await sql<{ id: string; replay_of: string }>('select id, replay_of from runs where id in (?)', [
    fits.body.items.map((i: { run: { id: string } }) => i.run.id),
  ]);
  const replayOf = new Map(rows.map((r) => [r.id, r.replay_of]));
  assert.equal(
    fits.body.items.map((i: { run: { id: string } }) => replayOf.get(i.run.id)),
    ids.slice(0, 2),
  );
  const one = await t.call('POST', '/runs/replay', { key, body: { ids: [ids[2], ids[3]] } });
  assert.is(one.status, 429, 'one left in the budget: two replays refused whole');
});

t('a single replay carries replayOf as soon as it is answered 202', async ({ t }) => {
  const original = await start(t, { workflow: W_SUMMARY, inputs: { topic: 'once' } });
  const res = await t.call('POST', `/runs/${original}/replay`, { key: BOB, body: {} });
  assert.is(res.status, 202, res.text);
  const [row] = await t.deps.orm.em.fork().execute('select replay_of from runs where id = ?', [res.body.run.id]);
  assert.is(row.replay_of, original);
});

t("a replay body that breaks the document is the call's 400, not a refusal per run: NUL, lone surrogate, metadata beyond its limits", async ({ t }) => {
  const a = await start(t, { workflow: W_SUMMARY, inputs: { topic: 'a' } });
  const bodies = [{ metadata: { team: 'o\u0000ps' } }, { inputs: { topic: ['\ud800'] } }, { metadata: { ['k'.repeat(65)]: 'v' } }];
  for (const options of bodies) {
    for (const [path, body] of [
      ['/runs/replay', { ids: [a], ...options }],
      [`/runs/${a}/replay`, options],
    ] as const) {
      const res = await t.call('POST', path, { key: BOB, body });
      assert.is(res.status, 400, `${path} ${JSON.stringify(body)}: ${res.text}`);
      assert.is(res.body.error.code, 'invalid_request');
    }
  }
  const cursorWithIds = await t.call('POST', '/runs/replay', { key: BOB, body: { ids: [a], cursor: 'x' } });
  assert.is(cursorWithIds.status, 400, 'the document allows no cursor with ids');
  const nullCursor = await t.call('POST', '/runs/cancel?dryRun=true', { key: BOB, body: { filter: { status: ['failed'] }, cursor: null } });
  assert.is(nullCursor.status, 200, `a null cursor is the first page, as the document says: ${nullCursor.text}`);
  const nullMember = await t.call('POST', '/runs/cancel?dryRun=true', { key: BOB, body: { filter: { status: ['failed'], createdBefore: null } } });
  assert.is(nullMember.status, 400, 'the document allows no null filter member');
  assert.match(nullMember.body.error.message, 'filter.createdBefore must not be null');
});

t.run();
