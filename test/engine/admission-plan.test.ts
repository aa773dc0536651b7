import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { query, statement } from '../../src/db/statement.ts';
import { ADMIT_QUEUED, admitValues, LOCK_ADMISSION } from '../../src/sql/admit-queued.ts';
import { resetDb, testOrm } from '../helpers/db.ts';

/**
 * How an admission round reads the runs table (src/sql/admit-queued.ts). Every finished run leaves a
 * dead entry in runs_in_flight_idx; only a plain index scan marks such entries as it passes them, so
 * the round must be planned neither as a bitmap scan, which would read all of them again every round,
 * nor by statistics that lag (a sequential scan of every run).
 */

const SETTING = statement('test_scan_settings', `select current_setting('enable_bitmapscan') || ' ' || current_setting('enable_seqscan') as v`);
const EXPLAIN_ADMIT = statement('test_explain_admit', `explain (costs off) ${ADMIT_QUEUED.text}`);

test.before(async () => {
  await resetDb(await testOrm());
});

test('the admission lock turns bitmap and sequential scans off for its transaction only', async () => {
  const orm = await testOrm();
  const inside = await orm.em.fork().transactional(async (tx) => {
    await query(tx, LOCK_ADMISSION, []);
    return (await query<{ v: string }>(tx, SETTING, []))[0]!.v;
  });
  assert.is(inside, 'off off', 'after the lock, the round is planned with neither');
  const after = (await query<{ v: string }>(orm.em.fork(), SETTING, []))[0]!.v;
  assert.is(after, 'on on', 'the settings end with the admission transaction');
});

test('an admission round counts the runs in flight through runs_in_flight_idx, by neither a bitmap nor a sequential scan', async () => {
  const orm = await testOrm();
  const plan = await orm.em.fork().transactional(async (tx) => {
    await query(tx, LOCK_ADMISSION, []);
    const rows = await query<{ 'QUERY PLAN': string }>(tx, EXPLAIN_ADMIT, admitValues({ capacity: 64, engine: 'embedded', window: 256 }));
    return rows.map((r) => r['QUERY PLAN']).join('\n');
  });
  assert.match(plan, /runs_in_flight_idx/, `the in-flight count reads the partial index:\n${plan}`);
  assert.not.match(plan, /Bitmap/, `no bitmap scan:\n${plan}`);
  assert.not.match(plan, /Seq Scan/, `no sequential scan (the suite's runs table is empty, where one would be chosen):\n${plan}`);
});

test.run();
