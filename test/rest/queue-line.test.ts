import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { admitQueuedRuns } from '../../src/runs/admit-runs.ts';
import { linePositions } from '../../src/runs/queue-positions.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';

/**
 * Queue places are a fact at any depth (docs/design/flow-control.md#places): however runs leave the
 * line (cancelled from the middle, admitted past an account at its limit), GET /runs/{id} answers the
 * place counted in the queue's order, and a run that waits is never written while it waits.
 */

const W_SUMMARY = 'aaaaaaaa-0000-4000-8000-000000000001';
const ALICE = '11111111-1111-4111-8111-111111111111';

const t = suite<{ t: TestApp }>('queue line: exact places at every depth');
t.before(async (ctx) => {
  ctx.t = await startTestApp();
});
t.after(async (ctx) => ctx.t.close());

async function start(t: TestApp, key: string): Promise<string> {
  const res = await t.call('POST', '/runs', { key, body: { workflow: W_SUMMARY, inputs: { topic: 'x' } } });
  assert.is(res.status, 202, res.text);
  return res.body.run.id;
}

/** Every run of `line` (in acceptance order) still queued must read its place among them. */
async function expectPlaces(t: TestApp, line: { id: string; key: string }[], gone: Set<string>, when: string) {
  const waiting = line.filter((r) => !gone.has(r.id));
  const got: number[] = [];
  for (const r of waiting) got.push((await t.call('GET', `/runs/${r.id}`, { key: r.key })).body.queue?.position);
  assert.equal(
    got,
    waiting.map((_, i) => i + 1),
    when,
  );
}

t('places stay exact through new runs behind, cancels from the middle and admission past an account at its limit', async ({ t }) => {
  const line: { id: string; key: string }[] = [];
  const gone = new Set<string>();
  for (let i = 0; i < 8; i++) {
    const key = i % 3 === 0 ? 'wr_test_alice' : 'wr_test_bob';
    line.push({ id: await start(t, key), key });
  }
  await expectPlaces(t, line, gone, 'just accepted');
  for (let i = 0; i < 4; i++) line.push({ id: await start(t, 'wr_test_bob'), key: 'wr_test_bob' });
  await expectPlaces(t, line, gone, 'with runs accepted behind them');

  for (const i of [2, 5, 9]) {
    assert.is((await t.call('POST', `/runs/${line[i]!.id}/cancel`, { key: line[i]!.key })).status, 200);
    gone.add(line[i]!.id);
  }
  await expectPlaces(t, line, gone, 'after cancels from the middle');

  // alice may run one at a time: admission takes her first run and passes her others over.
  await t.deps.orm.em.fork().execute('update accounts set max_concurrent_runs = 1 where id = ?', [ALICE]);
  const admitted = await admitQueuedRuns(t.deps, { capacity: 4 });
  assert.is(admitted.length, 4);
  for (const id of admitted) gone.add(id);
  assert.ok(
    line.some((r) => r.key === 'wr_test_alice' && !gone.has(r.id)),
    'an alice run was passed over',
  );
  await expectPlaces(t, line, gone, 'after admission past an account at its limit');
  const head = line.find((r) => !gone.has(r.id))!;
  assert.is((await t.call('GET', `/runs/${head.id}`, { key: head.key })).body.queue.position, 1, 'the head reads 1 (next)');
});

t('a queued run is never rewritten while it waits: its row version stays the one its acceptance wrote', async ({ t }) => {
  // Places are counted, not stored: nothing writes a waiting run (a numbering once did, a second after acceptance).
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) ids.push(await start(t, 'wr_test_bob'));
  const versions = async () =>
    (await t.deps.orm.em.fork().execute<{ v: string }[]>(`select xmin::text as v from runs where id in (?) order by id`, [ids])).map((r) => r.v);
  const accepted = await versions();
  await new Promise((r) => setTimeout(r, 2500));
  assert.equal(await versions(), accepted);
});

t('a place is read from one snapshot: runs accepted and admitted meanwhile never show a half-counted line', async ({ t }) => {
  // wr_fair_place runs several counts; were it VOLATILE each would take its own snapshot, and a run admitted
  // between two counts could be missed by one and counted by the other.
  const [fn] = await t.deps.orm.em.fork().execute<{ volatility: string }[]>(`select provolatile as volatility from pg_proc where proname = 'wr_fair_place'`);
  assert.is(fn?.volatility, 's', 'wr_fair_place is STABLE');
  const em = () => t.deps.orm.em.fork();
  await em().execute(`update runs set status = 'cancelled', phase = null where status = 'pending'`);
  const line: string[] = [];
  for (let round = 0; round < 12; round++) {
    const [, places] = await Promise.all([start(t, 'wr_test_bob').then((id) => line.push(id)), linePositions(em() as never, line)]);
    const waiting = line.filter((id) => places.has(id));
    assert.equal(
      waiting.map((id) => places.get(id)),
      waiting.map((_, i) => i + 1),
      `round ${round}: the places read at once are 1…n`,
    );
    if (round % 3 === 2) await admitQueuedRuns(t.deps, { capacity: 1 + round });
  }
});

t.run();
