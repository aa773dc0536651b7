import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { query, statement } from '../../src/db/statement.ts';
import { ADMIT_WAIT_BODY } from '../../src/db/migrations/Migration20261209040000AdmissionWait.ts';
import { ADMIT_QUEUED, admitValues } from '../../src/sql/admit-queued.ts';
import { resetDb, testOrm } from '../helpers/db.ts';

/**
 * How an admission round reads the runs table (wr_admit_queued, src/db/migrations/
 * Migration20261204000000AdmissionFunctions.ts). Every finished run leaves a dead entry in
 * runs_in_flight_idx; only a plain index scan marks such entries as it passes them, so the round must be
 * planned neither as a bitmap scan, which would read all of them again every round, nor by statistics
 * that lag (a sequential scan of every run, or a walk of the whole line for each picked run). A queued run's
 * place is held to its index by test/db/queue-place-plan.test.ts.
 */

const SETTING = statement('test_scan_settings', `select current_setting('enable_bitmapscan') || ' ' || current_setting('enable_seqscan') as v`);

/** A function's query as a statement of its own: its arguments become parameters, as plpgsql binds them. */
const functionQuery = (body: string, params: [string, string][]) =>
  params.reduce((text, [name, param]) => text.replace(new RegExp(`\\b${name}\\b`, 'g'), param), /return query\s+([\s\S]*);\s*end$/.exec(body)![1]!);
const ROUND_QUERY = functionQuery(ADMIT_WAIT_BODY, [
  ['round_capacity', '$1::int'],
  ['round_engine', '$2::text'],
  ['queue_window', '$3::int'],
  ['lease_holder', '$4::text'],
  ['lease_seconds', '$5::float8'],
]);
const EXPLAIN_ROUND = statement('test_explain_admit', `explain (costs off) ${ROUND_QUERY}`);
const SCAN_SETTINGS_OFF = statement('test_scan_settings_off', `select set_config('enable_bitmapscan', 'off', true), set_config('enable_seqscan', 'off', true)`);

test.before(async () => {
  await resetDb(await testOrm());
});

test('a round turns bitmap and sequential scans off for its transaction only', async () => {
  const orm = await testOrm();
  const round = admitValues({ capacity: 64, engine: 'embedded', window: 256 });
  const inside = await orm.em.fork().transactional(async (tx) => {
    assert.is((await query<{ v: string }>(tx, SETTING, []))[0]!.v, 'on on', 'before the round');
    await query(tx, ADMIT_QUEUED, round);
    return (await query<{ v: string }>(tx, SETTING, []))[0]!.v;
  });
  assert.is(inside, 'off off', 'after the lock, the round is planned with neither');
  const after = (await query<{ v: string }>(orm.em.fork(), SETTING, []))[0]!.v;
  assert.is(after, 'on on', 'the settings end with the admission transaction');
});

/**
 * The round's plan as the function gets it after turning the scans off. The suite's runs table is nearly
 * empty, so the planner sees a short queue, as it does on statistics taken before a burst of batches
 * filled the queue (autovacuum analyzes a busy table long after).
 */
async function roundPlan(): Promise<string> {
  const orm = await testOrm();
  return orm.em.fork().transactional(async (tx) => {
    await query(tx, SCAN_SETTINGS_OFF, []);
    const rows = await query<{ 'QUERY PLAN': string }>(tx, EXPLAIN_ROUND, admitValues({ capacity: 64, engine: 'embedded', window: 256 }));
    return rows.map((r) => r['QUERY PLAN']).join('\n');
  });
}

test('an admission round counts the runs in flight through runs_in_flight_idx and reads the queue through runs_queue_fair_idx, by neither a bitmap nor a sequential scan', async () => {
  const plan = await roundPlan();
  assert.match(plan, /runs_in_flight_idx/, `the in-flight count reads the partial index:\n${plan}`);
  assert.match(plan, /Index Scan using runs_queue_fair_idx on runs queued/, `the head of the queue is read in its index order:\n${plan}`);
  assert.not.match(plan, /Bitmap/, `no bitmap scan:\n${plan}`);
  assert.not.match(plan, /Seq Scan/, `no sequential scan (the suite's runs table is empty, where one would be chosen):\n${plan}`);
});

test('an admission round admits its picked runs found by primary key, not by walking the line, on statistics that see a short queue', async () => {
  const plan = await roundPlan();
  assert.match(plan, /Index Scan using runs_pkey on runs run\b/, `each picked run is found by its id:\n${plan}`);
  assert.not.match(plan, /using runs_queue_\w+ on runs run\b/, `the update walks none of the queue's indexes:\n${plan}`);
});

test.run();
