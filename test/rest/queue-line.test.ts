import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { admitQueuedRuns } from '../../src/runs/admit-runs.ts';
import { linePositions, numberQueuedRuns } from '../../src/runs/queue-line.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';

/**
 * Queue places are a fact at any depth (src/runs/queue-line.ts): whatever mix of numbered and
 * not yet numbered runs the line holds, and however runs leave it (cancelled from the middle, admitted
 * past an account at its limit), GET /runs/{id} answers the place counted from the line itself.
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

t('places stay exact through numbering, cancels from the middle and admission past an account at its limit', async ({ t }) => {
  const line: { id: string; key: string }[] = [];
  const gone = new Set<string>();
  for (let i = 0; i < 8; i++) {
    const key = i % 3 === 0 ? 'wr_test_alice' : 'wr_test_bob';
    line.push({ id: await start(t, key), key });
  }
  await expectPlaces(t, line, gone, 'just accepted (numbered or not)');
  await numberQueuedRuns(t.deps.orm.em.fork() as never);
  for (let i = 0; i < 4; i++) line.push({ id: await start(t, 'wr_test_bob'), key: 'wr_test_bob' });
  await expectPlaces(t, line, gone, 'numbered runs and a fresh tail');

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
  await numberQueuedRuns(t.deps.orm.em.fork() as never);
  await expectPlaces(t, line, gone, 'after numbering the tail');
  const head = line.find((r) => !gone.has(r.id))!;
  assert.is((await t.call('GET', `/runs/${head.id}`, { key: head.key })).body.queue.position, 1, 'the head reads 1 (next)');
});

t('runs still queued are numbered about a second after their acceptance, without anyone reading them', async ({ t }) => {
  for (let i = 0; i < 5; i++) await start(t, 'wr_test_bob');
  const em = () => t.deps.orm.em.fork();
  let unnumbered = -1;
  for (let i = 0; i < 200 && unnumbered !== 0; i++) {
    await new Promise((r) => setTimeout(r, 20));
    [{ n: unnumbered }] = await em().execute<{ n: number }[]>(
      `select count(*)::int as n from runs where status = 'pending' and phase = 'queued' and queue_seq is null`,
    );
  }
  assert.is(unnumbered, 0);
});

t('a place is read from one snapshot: numbering that commits meanwhile never shows a half-numbered line', async ({ t }) => {
  // wr_queue_place runs several queries; were it VOLATILE each would take its own snapshot, and a numbering
  // committed between the head's query and the tail's made a queued run read place 0.
  const [fn] = await t.deps.orm.em.fork().execute<{ volatility: string }[]>(`select provolatile as volatility from pg_proc where proname = 'wr_queue_place'`);
  assert.is(fn?.volatility, 's', 'wr_queue_place is STABLE');
  const em = () => t.deps.orm.em.fork();
  const line: string[] = [];
  for (let round = 0; round < 12; round++) {
    for (let i = 0; i < 3; i++) line.push(await start(t, 'wr_test_bob'));
    const [, places] = await Promise.all([numberQueuedRuns(em() as never), linePositions(em() as never, line)]);
    // Runs of the tests above may still wait ahead of these: the places follow on from the first.
    const first = places.get(line[0]!)!;
    assert.ok(first >= 1, `round ${round}: the first reads ${first}`);
    assert.equal(
      line.map((id) => places.get(id)),
      line.map((_, i) => first + i),
      `round ${round}`,
    );
  }
});

t.run();
