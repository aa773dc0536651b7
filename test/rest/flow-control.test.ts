import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { admitQueuedRuns } from '../../src/runs/admit-runs.ts';
import { LOW_PRIORITY_AGE_SECONDS } from '../../src/db/migrations/Migration20261208000000RunPriorityAndFairness.ts';
import { startPeerApp, startTestApp, type TestApp } from '../helpers/app.ts';

/**
 * Priority and concurrency keys (docs/design/flow-control.md) through POST /runs and POST /runs/batch:
 * admission takes the higher class first and goes round robin across concurrency keys, a low run is aged
 * up, a key's bound holds, and every queued run's place is the number of runs admission takes before it.
 * The engine is a NullEngine: rounds are run here, with the capacity each step needs.
 */

const W_SUMMARY = 'aaaaaaaa-0000-4000-8000-000000000001';
const RUN_CAPACITY = 16;

const t = suite<{ t: TestApp }>('flow control: priority and concurrency keys');
t.before(async (ctx) => {
  ctx.t = await startTestApp();
});
t.after(async (ctx) => ctx.t.close());
// Every test starts from an empty queue: what earlier tests left queued is cancelled.
t.before.each(async ({ t }) => {
  await t.deps.orm.em.fork().execute(`update runs set status = 'cancelled', phase = null where status = 'pending'`);
});

const body = (extra: Record<string, unknown> = {}) => ({ workflow: W_SUMMARY, inputs: { topic: 'x' }, ...extra });

async function start(t: TestApp, key: string, extra: Record<string, unknown> = {}): Promise<string> {
  const res = await t.call('POST', '/runs', { key, body: body(extra) });
  assert.is(res.status, 202, res.text);
  return res.body.run.id;
}

/** `n` runs in batches of 1,000, in order. */
async function startMany(t: TestApp, key: string, n: number, extra: Record<string, unknown> = {}): Promise<string[]> {
  const ids: string[] = [];
  for (let from = 0; from < n; from += 1000) {
    const runs = Array.from({ length: Math.min(1000, n - from) }, () => body(extra));
    const res = await t.call('POST', '/runs/batch', { key, body: { runs } });
    assert.is(res.status, 202, res.text);
    assert.is(res.body.accepted, runs.length);
    ids.push(...res.body.items.map((i: { run: { id: string } }) => i.run.id));
  }
  return ids;
}

const place = async (t: TestApp, id: string, key: string): Promise<number | undefined> => (await t.call('GET', `/runs/${id}`, { key })).body.queue?.position;

/** Runs in flight now (admitted and not finished: the NullEngine never starts them). */
async function inFlight(t: TestApp): Promise<number> {
  const [{ n }] = await t.deps.orm.em.fork().execute<{ n: number }[]>(`select count(*)::int as n from runs where status = 'pending' and phase = 'starting'`);
  return n;
}

/** One admission round with RUN_CAPACITY free slots (the runs admitted before stay in flight). */
async function nextRound(t: TestApp): Promise<Set<string>> {
  return new Set(await admitQueuedRuns(t.deps, { capacity: (await inFlight(t)) + RUN_CAPACITY }));
}

t('a high run submitted behind 5,000 normal ones is admitted in the next round, first; the normal ones keep FIFO and exact places', async ({ t }) => {
  const normal = await startMany(t, 'wr_test_alice', 5000);
  const first = await nextRound(t);
  assert.equal([...first].sort(), normal.slice(0, RUN_CAPACITY).sort(), 'the first round takes the first 16 in order');
  const high = await start(t, 'wr_test_alice', { priority: 'high' });
  assert.is(await place(t, high, 'wr_test_alice'), 1, 'the high run is next');
  assert.is(await place(t, normal[RUN_CAPACITY]!, 'wr_test_alice'), 2, 'the first normal run waits behind it');
  assert.is(await place(t, normal[4999]!, 'wr_test_alice'), 5000 - RUN_CAPACITY + 1, 'the last normal run counts every run before it');
  const second = await nextRound(t);
  assert.ok(second.has(high), 'the high run is admitted in the next round');
  assert.equal([...second].filter((id) => id !== high).sort(), normal.slice(RUN_CAPACITY, 2 * RUN_CAPACITY - 1).sort(), 'then the normal ones in order');
});

t('key B starting one run behind key A’s 5,000 is admitted in the next round, long before A’s 50th', async ({ t }) => {
  const a = await startMany(t, 'wr_test_bob', 5000, { concurrencyKey: 'customer-a' });
  await nextRound(t);
  const b = await start(t, 'wr_test_bob', { concurrencyKey: 'customer-b' });
  const bPlace = await place(t, b, 'wr_test_bob');
  assert.ok(bPlace !== undefined && bPlace <= 3, `B waits behind at most one round of A (place ${bPlace})`);
  assert.is(await place(t, a[4999]!, 'wr_test_bob'), 5000 - RUN_CAPACITY + 1, 'A’s last run counts B too');
  const second = await nextRound(t);
  assert.ok(second.has(b), 'B is admitted in the next round');
  assert.ok(!second.has(a[49]!) && (await place(t, a[49]!, 'wr_test_bob')) !== undefined, 'A’s 50th run still waits');
});

t('every place is the number of runs admission takes before the run: classes, aging, keys and plain runs mixed', async ({ t }) => {
  const alice = 'wr_test_alice';
  const ids: string[] = [];
  for (let i = 0; i < 6; i++) ids.push(await start(t, alice, { concurrencyKey: 'k1' }));
  ids.push(await start(t, alice, { priority: 'low' }));
  ids.push(await start(t, alice));
  ids.push(await start(t, alice, { concurrencyKey: 'k2' }));
  ids.push(await start(t, alice, { priority: 'high', concurrencyKey: 'k1' }));
  ids.push(await start(t, alice, { priority: 'low' }));
  ids.push(await start(t, alice));
  // The first low run has waited past the aging bound: it counts as normal, ahead of every normal run.
  const aged = ids[6]!;
  await t.deps.orm.em.fork().execute(`update runs set queued_at = queued_at - make_interval(secs => ?) where id = ?`, [LOW_PRIORITY_AGE_SECONDS + 1, aged]);
  // Alice's key bounds each concurrency key to 2 in flight, which would let admission pass k1's third run over.
  await t.deps.orm.em.fork().execute(`update runs set concurrency_limit = null where id in (?)`, [ids]);

  const places = new Map<string, number>();
  for (const id of ids) places.set(id, (await place(t, id, alice))!);
  assert.equal(
    [...places.values()].sort((x, y) => x - y),
    ids.map((_, i) => i + 1),
    'places 1…n, each once',
  );
  const order = [...ids].sort((x, y) => places.get(x)! - places.get(y)!);
  assert.is(order[0], ids[9], 'the high run first');
  assert.is(order[1], aged, 'then the aged low run');
  assert.is(order.at(-1), ids[10], 'the low run that has not waited long is last');
  assert.ok(order.indexOf(ids[8]!) < order.indexOf(ids[2]!), 'k2’s run goes ahead of k1’s third');

  for (let k = 0; k < ids.length; k++) {
    const admitted = await admitQueuedRuns(t.deps, { capacity: (await inFlight(t)) + 1 });
    assert.equal(admitted, [order[k]], `round ${k + 1} admits the run that read place ${k + 1}`);
    for (const id of order.slice(k + 1)) assert.is(await place(t, id, alice), places.get(id)! - k - 1, 'every place moves up by one');
  }
});

t('a key’s bound: the catalog’s (2 for alice’s key), lowered per request, never raised; high needs a key the catalog allows', async ({ t }) => {
  const bounded = [];
  for (let i = 0; i < 4; i++) bounded.push(await start(t, 'wr_test_alice', { concurrencyKey: 'tenant' }));
  const one = [await start(t, 'wr_test_alice', { concurrencyKey: 'solo', maxConcurrentPerConcurrencyKey: 1 })];
  one.push(await start(t, 'wr_test_alice', { concurrencyKey: 'solo', maxConcurrentPerConcurrencyKey: 1 }));
  const admitted = new Set(await admitQueuedRuns(t.deps, { capacity: 100 }));
  assert.equal(
    bounded.map((id) => admitted.has(id)),
    [true, true, false, false],
    'two of the key in flight',
  );
  assert.equal(
    one.map((id) => admitted.has(id)),
    [true, false],
    'one of the key that asked for one',
  );
  const listed = await t.call('GET', '/runs?concurrencyKey=tenant&limit=50', { key: 'wr_test_alice' });
  assert.is(listed.status, 200);
  assert.equal(
    listed.body.runs.map((r: { id: string }) => r.id),
    [...bounded].reverse(),
    'GET /runs?concurrencyKey= lists the key’s runs, newest first',
  );
  const tooLong = await t.call('GET', `/runs?concurrencyKey=${'k'.repeat(129)}`, { key: 'wr_test_alice' });
  assert.is(tooLong.status, 400);

  const above = await t.call('POST', '/runs', { key: 'wr_test_alice', body: body({ concurrencyKey: 'x', maxConcurrentPerConcurrencyKey: 3 }) });
  assert.is(above.status, 400);
  assert.is(above.body.error.code, 'invalid_request');
  const high = await t.call('POST', '/runs', { key: 'wr_test_bob', body: body({ priority: 'high' }) });
  assert.is(high.status, 403);
  assert.is(high.body.error.code, 'forbidden');
  assert.match(high.body.error.message, /high priority/);
  for (const [extra, what] of [
    [{ priority: 'urgent' }, 'an unknown priority'],
    [{ concurrencyKey: 'k'.repeat(129) }, 'a key of 129 characters'],
    [{ concurrencyKey: '' }, 'an empty key'],
    [{ maxConcurrentPerConcurrencyKey: 1 }, 'a bound without a key'],
  ] as const) {
    const res = await t.call('POST', '/runs', { key: 'wr_test_alice', body: body(extra) });
    assert.is(res.status, 400, what);
    assert.is(res.body.error.code, 'invalid_request', what);
  }
  const batch = await t.call('POST', '/runs/batch', {
    key: 'wr_test_bob',
    body: { runs: [body({ priority: 'high' }), body({ priority: 'low', concurrencyKey: 'tenant-9' }), body()] },
  });
  assert.is(batch.status, 202);
  assert.is(batch.body.items[0].error.code, 'forbidden', 'a batch item is refused as POST /runs refuses it');
  const [low, plain] = [batch.body.items[1].run.id, batch.body.items[2].run.id];
  const lowRun = (await t.call('GET', `/runs/${low}`, { key: 'wr_test_bob' })).body;
  assert.equal([lowRun.priority, lowRun.concurrencyKey], ['low', 'tenant-9'], 'the run shows what it was started with');
  const plainRun = (await t.call('GET', `/runs/${plain}`, { key: 'wr_test_bob' })).body;
  assert.ok(!('priority' in plainRun) && !('concurrencyKey' in plainRun), 'a normal run without a key shows neither');
});

t('two API processes: the runs each accepts share one order, so B’s run accepted by the other process is admitted in the next round', async ({ t }) => {
  const peer = await startPeerApp();
  try {
    const a = await startMany(t, 'wr_test_bob', 1000, { concurrencyKey: 'customer-a' });
    await nextRound(t);
    const res = await fetch(`${peer.base}/runs`, {
      method: 'POST',
      headers: { authorization: 'Bearer wr_test_bob', 'content-type': 'application/json' },
      body: JSON.stringify(body({ concurrencyKey: 'customer-b' })),
    });
    assert.is(res.status, 202);
    const b = ((await res.json()) as { run: { id: string } }).run.id;
    const admitted = new Set(await admitQueuedRuns(peer.app.deps, { capacity: (await inFlight(t)) + RUN_CAPACITY }));
    assert.ok(admitted.has(b), 'B is admitted in the next round, by the other process');
    assert.ok(!admitted.has(a[49]!), 'before A’s 50th');
  } finally {
    await peer.app.close();
  }
});

t.run();
