import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { query, statement } from '../../src/db/statement.ts';
import { UNSTARTED_TEMPORAL_RUNS } from '../../src/sql/temporal-runs.ts';
import { ENTER_DUE_RUNS, NEXT_SCHEDULED_START } from '../../src/sql/scheduled-runs.ts';
import { JOIN_DEBOUNCED_RUN } from '../../src/sql/debounce-runs.ts';
import { randomUUID } from 'node:crypto';
import { LIST_RUNS, LIST_RUNS_BY_CONCURRENCY_KEY, LIST_RUNS_BY_LABEL, OVERDUE_RUNS, type RunListCall } from '../../src/sql/runs.ts';
import type { Em } from '../../src/db/orm.ts';
import { runSearchQuery } from '../../src/graphql/queries/runs.ts';
import { resetDb, testOrm } from '../helpers/db.ts';

/**
 * Every index on `runs` is written for every run (its insert and its terminal write), so the table keeps
 * only indexes some query reads (src/db/migrations/Migration20261202010000FewerIndexes.ts). A sweep that
 * looks for a few runs among all of them reads an index of those few.
 */

const EXPLAIN_UNSTARTED = statement('test_explain_unstarted', `explain (costs off) ${UNSTARTED_TEMPORAL_RUNS.text}`);
const INDEXES = statement('test_runs_indexes', `select indexname from pg_indexes where schemaname = 'public' and tablename = 'runs' order by indexname`);

test.before(async () => {
  await resetDb(await testOrm());
});

test("the Temporal engine's sweep for unstarted runs reads the index of such runs, in its order", async () => {
  const orm = await testOrm();
  const plan = await orm.em.fork().transactional(async (tx) => {
    // The suite's table is nearly empty, where a sequential scan would be chosen whatever the indexes.
    await tx.execute(`select set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true)`);
    const rows = await query<{ 'QUERY PLAN': string }>(tx, EXPLAIN_UNSTARTED, [5]);
    return rows.map((r) => r['QUERY PLAN']).join('\n');
  });
  assert.match(plan, /Index Scan using runs_temporal_unstarted_idx on runs/, `the sweep reads its partial index:\n${plan}`);
  assert.not.match(plan, /Sort/, `the index gives the sweep's order:\n${plan}`);
});

test('the rounds that move delayed starts into the line read the index of scheduled runs, due first; a debounce finds its run by key', async () => {
  const orm = await testOrm();
  const plans = await orm.em.fork().transactional(async (tx) => {
    await tx.execute(`select set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true)`);
    const explain = async (name: string, text: string, values: unknown[]) =>
      (await query<{ 'QUERY PLAN': string }>(tx, statement(name, `explain (costs off) ${text}`), values)).map((r) => r['QUERY PLAN']).join('\n');
    const joining = [{ ord: 1, account_id: randomUUID(), version_id: randomUUID(), key: 'k', delay_s: 5, inputs: '{}', metadata: '{}' }];
    return {
      enter: await explain('test_explain_enter_due', ENTER_DUE_RUNS.text, ['embedded', 10]),
      next: await explain('test_explain_next_start', NEXT_SCHEDULED_START.text, ['embedded']),
      join: await explain('test_explain_join_debounced', JOIN_DEBOUNCED_RUN.text, [JSON.stringify(joining), '[]']),
    };
  });
  assert.match(plans.enter, /Index Scan using runs_scheduled_idx on runs/, `entering the line reads the index:\n${plans.enter}`);
  // The due runs come in the index's order, unsorted; only the set that enters is sorted, for the passes it takes.
  assert.match(
    plans.enter,
    /CTE due\n\s+->\s+Limit\n\s+->\s+LockRows\n\s+->\s+Index Scan using runs_scheduled_idx/,
    `the index gives the due order:\n${plans.enter}`,
  );
  assert.match(plans.next, /runs_scheduled_idx/, `the next start reads the index:\n${plans.next}`);
  assert.match(plans.join, /runs_debounce_idx/, `a debounced call finds its run by key:\n${plans.join}`);
});

test("the internal search for a workflow's runs reads them newest first from the workflow's index", async () => {
  const orm = await testOrm();
  const plan = await orm.em.fork().transactional(async (tx) => {
    await tx.execute(`select set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true)`);
    const search = runSearchQuery(tx as unknown as Em, { workflowId: '00000000-0000-4000-8000-000000000001', offset: 0, limit: 20 });
    const rows = await tx.execute<{ 'QUERY PLAN': string }[]>(`explain (costs off) ${search.getFormattedQuery()}`);
    return rows.map((r) => r['QUERY PLAN']).join('\n');
  });
  assert.match(plan, /Index Scan Backward using runs_workflow_created_idx on runs/, `the search reads the workflow's index:\n${plan}`);
  assert.not.match(plan, /Sort/, `the index gives the search's order:\n${plan}`);
});

/** The plan of `explain (costs off)` of `text` with `values`, with sequential and bitmap scans off (the suite's tables are nearly empty). */
async function planOf(name: string, text: string, values: unknown[]): Promise<string> {
  const orm = await testOrm();
  return orm.em.fork().transactional(async (tx) => {
    await tx.execute(`select set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true)`);
    const rows = await query<{ 'QUERY PLAN': string }>(tx, statement(`test_explain_${name}`, `explain (costs off) ${text}`), values);
    return rows.map((r) => r['QUERY PLAN']).join('\n');
  });
}

const ACCOUNT = '00000000-0000-4000-8000-000000000001';

/** A list's call (src/sql/runs.ts RunListCall), as JSON: the account's first page, unfiltered unless `more` says. */
const listCall = (more: Partial<RunListCall> = {}) =>
  JSON.stringify({ account_id: ACCOUNT, statuses: null, workflow_id: null, created_after: null, created_before: null, max_rows: 21, skip_rows: 0, ...more });

test("GET /runs, with or without a time range, reads the account's runs newest first from its index, as a range", async () => {
  for (const range of [{}, { created_after: '2026-01-01T00:00:00Z', created_before: '2026-02-01T00:00:00Z' }]) {
    const plan = await planOf(`list_${'created_after' in range ? 'range' : 'all'}`, LIST_RUNS.text, [listCall(range)]);
    assert.match(plan, /Index Scan Backward using runs_account_created_idx on runs/, plan);
    assert.match(plan, /Index Cond: \(\(account_id = .*created_at >= .*created_at < /s, `the range bounds the index scan:\n${plan}`);
    assert.not.match(plan, /Sort/, `the index gives the list's order:\n${plan}`);
  }
});

test("GET /runs?metadata[KEY]=VALUE walks the pair's runs newest first in run_labels, each run read by its key", async () => {
  const call = listCall({ created_before: '2026-02-01T00:00:00Z', label_key: 'env', label_value: 'prod', metadata: { env: 'prod' } });
  const plan = await planOf('by_label', LIST_RUNS_BY_LABEL.text, [call]);
  assert.match(plan, /Index (Only )?Scan Backward using run_labels_pkey on run_labels/, plan);
  assert.match(plan, /Index Scan using runs_pkey on runs/, plan);
  assert.not.match(plan, /Sort/, `the index gives the list's order:\n${plan}`);
});

test('GET /runs?concurrencyKey= reads the key’s runs newest first from their index', async () => {
  const plan = await planOf('by_concurrency_key', LIST_RUNS_BY_CONCURRENCY_KEY.text, [listCall({ concurrency_key: 'customer-1', metadata: {} })]);
  assert.match(plan, /Index Scan Backward using runs_concurrency_key_created_idx on runs/, plan);
  assert.not.match(plan, /Sort/, `the index gives the list's order:\n${plan}`);
});

test("the engines' deadline sweep reads the index of live runs that have a deadline", async () => {
  const plan = await planOf('overdue', OVERDUE_RUNS.text, ['embedded', null, 100]);
  assert.match(plan, /Index Scan using runs_deadline_idx on runs/, plan);
});

test('the runs table has exactly the indexes its queries read', async () => {
  const orm = await testOrm();
  const names = (await query<{ indexname: string }>(orm.em.fork(), INDEXES, [])).map((r) => r.indexname);
  assert.equal(names, [
    'runs_account_created_idx',
    'runs_api_key_created_idx',
    'runs_completed_idx',
    'runs_concurrency_key_created_idx',
    'runs_deadline_idx',
    'runs_debounce_idx',
    'runs_in_flight_idx',
    'runs_pkey',
    'runs_queue_fair_idx',
    'runs_queue_key_idx',
    'runs_scheduled_idx',
    'runs_temporal_unstarted_idx',
    'runs_workflow_created_idx',
  ]);
});

test.run();
