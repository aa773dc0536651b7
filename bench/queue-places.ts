import { closeTestOrm } from '../test/helpers/db.ts';
import { startTestApp, type TestApp } from '../test/helpers/app.ts';
import { cloneRun } from '../test/helpers/cloned-runs.ts';

/**
 * What reading a queued run's place costs at a queue depth: `tsx bench/queue-places.ts 1000 20000` on the
 * database of DATABASE_URL (its public schema is rebuilt, as the tests do) or PGlite. A thousand runs are
 * accepted through POST /runs/batch with no engine (they stay queued), the rest of the depth copied from
 * the last of them (the key's rate limit), one more accepted behind them; left a few seconds (what the
 * service does to runs that wait happens meanwhile), then the place of the first and of the last queued run is read with
 * the statement GET /runs/{id} uses, 200 times each; the same after a VACUUM of the runs table. Prints
 * one JSON line per depth: median milliseconds per read, and the pages of the queue's index.
 */

const W_SUMMARY = 'aaaaaaaa-0000-4000-8000-000000000001';
const READS = 200;
const SETTLE_MS = 3000;

/** The first and the last run of a queue of `depth`. */
async function accept(t: TestApp, depth: number): Promise<[string, string]> {
  const batch = Math.min(1000, depth - 1);
  const runs = Array.from({ length: batch }, (_, i) => ({ workflow: W_SUMMARY, inputs: { topic: `p${i}` } }));
  const res = await t.call('POST', '/runs/batch', { key: 'wr_test_bob', body: { runs } });
  if (res.status !== 202) throw new Error(`POST /runs/batch answered ${res.status}`);
  const ids: string[] = res.body.items.map((i: { run: { id: string } }) => i.run.id);
  if (depth - 1 > batch) await cloneRun(t.deps.orm, ids.at(-1)!, depth - 1 - batch);
  const last = await t.call('POST', '/runs', { key: 'wr_test_bob', body: { workflow: W_SUMMARY, inputs: { topic: 'last' } } });
  if (last.status !== 202) throw new Error(`POST /runs answered ${last.status}`);
  return [ids[0]!, last.body.run.id];
}

/** Median milliseconds of reading run `id`'s place as GET /runs/{id} does (the row and its place in one statement). */
async function placeRead(t: TestApp, id: string): Promise<{ ms: number; position: number }> {
  const em = t.deps.orm.em.fork();
  const read = () => em.execute<{ position: string }[]>(`select wr_fair_place(priority, fair_pass, queued_at, id) as position from runs where id = ?`, [id]);
  const [first] = await read();
  const times: number[] = [];
  for (let i = 0; i < READS; i++) {
    const started = process.hrtime.bigint();
    await read();
    times.push(Number(process.hrtime.bigint() - started) / 1e6);
  }
  times.sort((a, b) => a - b);
  return { ms: Number(times[Math.floor(READS / 2)]!.toFixed(3)), position: Number(first!.position) };
}

/** Pages of the queue's index (every version of a queued run's row has an entry until a vacuum removes the dead ones). */
async function indexPages(t: TestApp): Promise<number> {
  const [row] = await t.deps.orm.em.fork().execute<{ pages: string }[]>(`select pg_relation_size('runs_queue_fair_idx') / 8192 as pages`);
  return Number(row?.pages ?? 0);
}

const depths = process.argv.slice(2).map(Number);
for (const depth of depths.length ? depths : [1000, 20000]) {
  const t = await startTestApp();
  const [head, tail] = await accept(t, depth);
  await new Promise((r) => setTimeout(r, SETTLE_MS));
  const fresh = { head: await placeRead(t, head), tail: await placeRead(t, tail), indexPages: await indexPages(t) };
  await t.deps.orm.em.fork().execute('vacuum runs');
  const vacuumed = { head: await placeRead(t, head), tail: await placeRead(t, tail), indexPages: await indexPages(t) };
  console.log(JSON.stringify({ depth, fresh, vacuumed }));
  await t.close();
}
await closeTestOrm();
