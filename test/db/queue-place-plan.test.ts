import { randomUUID } from 'node:crypto';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { Orm } from '../../src/db/orm.ts';
import { FAIR_PLACE_COUNTS } from '../../src/db/migrations/Migration20261208000000RunPriorityAndFairness.ts';
import { resetDb, testOrm } from '../helpers/db.ts';

/**
 * What reading a queued run's place costs (docs/design/flow-control.md#places): wr_fair_place adds up
 * counts of the queued runs ahead of the run, and each count must read runs_queue_fair_idx alone, an
 * index-only range, never the runs' rows (wide: inputs, progress, outputs). The plans are taken with the
 * function's own settings over a queue of a few thousand runs of every class, analyzed and vacuumed as
 * autovacuum leaves a busy table, and on statistics taken before the queue filled; both as a plpgsql
 * function plans its queries at first (custom plans, the arguments known) and as it may keep them after
 * five calls (generic plans).
 */

const DEPTH = 3000;
const ENDED = 30_000;

/**
 * A queue of DEPTH runs (a tenth high, a tenth low, half of those aged, keyed and unkeyed passes) in a
 * table that holds, as a live one does, many more runs that have ended.
 */
async function fillQueue(orm: Orm, analyzed: boolean): Promise<void> {
  await resetDb(orm);
  const em = orm.em.fork();
  const [accountId, workflowId, versionId] = [randomUUID(), randomUUID(), randomUUID()];
  await em.execute(`insert into accounts (id, handle) values (?, 'placed')`, [accountId]);
  await em.execute(`insert into workflows (id, owner_id, name, run_model, listing, credential_mode) values (?, ?, 'w', 'free', 'public', 'service_hosted')`, [
    workflowId,
    accountId,
  ]);
  await em.execute(`insert into workflow_versions (id, workflow_id, label, graph, graph_hash) values (?, ?, 'v1', '{"nodes":[]}', ?)`, [
    versionId,
    workflowId,
    'x'.repeat(64),
  ]);
  await em.execute(
    `insert into runs (id, account_id, workflow_id, version_id, status, phase, user_access, compute_limit_usd, credential_mode, inputs, progress,
                       engine, queued_at, priority, concurrency_key, fair_pass)
     select gen_random_uuid(), ?, ?, ?, 'pending', 'queued', 'wallet', 5, 'service_hosted', '{}', '{"results":{},"timers":{}}', 'embedded',
            now() - make_interval(secs => case when i % 20 = 0 then 900 else i % 60 end),
            case when i % 10 = 0 then 0 when i % 10 = 5 or i % 20 = 0 then 2 else 1 end,
            case when i % 3 = 0 then 'key-' || (i % 7) end, 1 + i / 50
       from generate_series(1, ?) i`,
    [accountId, workflowId, versionId, DEPTH],
  );
  await em.execute(
    `insert into runs (id, account_id, workflow_id, version_id, status, user_access, compute_limit_usd, credential_mode, inputs, progress, engine)
     select gen_random_uuid(), ?, ?, ?, 'completed', 'wallet', 5, 'service_hosted', '{}', '{"results":{},"timers":{}}', 'embedded'
       from generate_series(1, ?)`,
    [accountId, workflowId, versionId, ENDED],
  );
  if (analyzed) await em.execute('vacuum analyze runs');
}

/** wr_fair_place's own settings (`name=value`), as set on the function. */
async function functionSettings(orm: Orm): Promise<string[]> {
  const [row] = await orm.em.fork().execute<{ settings: string[] | null }[]>(`select proconfig as settings from pg_proc where proname = 'wr_fair_place'`);
  return row?.settings ?? [];
}

/** A count as a statement of its own, its arguments as the parameters of a prepared statement (plpgsql binds them so). */
const countQuery = (count: string) =>
  `select ${count
    .replace(/\baged_before\b/g, '$1')
    .replace(/\brun_pass\b/g, '$2')
    .replace(/\brun_queued_at\b/g, '$3')
    .replace(/\brun_id\b/g, '$4')}`;

/** A normal run in the middle of the queue. */
const ARGS = `now() - interval '300 seconds', 30::bigint, now() - interval '30 seconds', '00000000-0000-4000-8000-000000000000'::uuid`;

async function plans(orm: Orm, mode: 'force_custom_plan' | 'force_generic_plan', analyze: boolean): Promise<Record<string, string>> {
  const settings = await functionSettings(orm);
  return orm.em.fork().transactional(async (tx) => {
    await tx.execute(`select set_config('plan_cache_mode', '${mode}', true)`);
    for (const [name, value] of settings.map((s) => s.split('='))) await tx.execute(`select set_config(?, ?, true)`, [name, value]);
    const out: Record<string, string> = {};
    for (const [name, count] of Object.entries(FAIR_PLACE_COUNTS)) {
      const prepared = `test_place_${name}_${mode === 'force_generic_plan' ? 'g' : 'c'}_${analyze ? 'a' : 'p'}`;
      await tx.execute(`prepare ${prepared}(timestamptz, bigint, timestamptz, uuid) as ${countQuery(count)}`);
      const options = analyze ? 'analyze, costs off, timing off, summary off' : 'costs off';
      const rows = await tx.execute<{ 'QUERY PLAN': string }[]>(`explain (${options}) execute ${prepared}(${ARGS})`);
      await tx.execute(`deallocate ${prepared}`);
      out[name] = rows.map((r) => r['QUERY PLAN']).join('\n');
    }
    return out;
  });
}

/** Every count, in custom and generic plans, is an index-only range of the queue's index. */
async function expectIndexOnly(orm: Orm, when: string): Promise<void> {
  for (const mode of ['force_custom_plan', 'force_generic_plan'] as const) {
    for (const [name, plan] of Object.entries(await plans(orm, mode, false))) {
      const what = `${when}, ${mode}, ${name}`;
      assert.match(plan, /Index Only Scan using runs_queue_fair_idx on runs queued/, `${what}: an index-only scan of the queue's index:\n${plan}`);
      assert.not.match(plan, /Seq Scan|Bitmap|(?<!Only )Index Scan/, `${what}: nothing reads the runs' rows:\n${plan}`);
      assert.match(plan, /Index Cond: \(+priority [=<] /, `${what}: the class bounds the range:\n${plan}`);
    }
  }
}

test('the place function plans with sequential and bitmap scans off', async () => {
  const settings = await functionSettings(await testOrm());
  assert.ok(settings.includes('enable_seqscan=off') && settings.includes('enable_bitmapscan=off'), settings.join(', '));
});

test("on statistics taken before the queue filled, each count of a place still reads only the queue's index", async () => {
  const orm = await testOrm();
  await fillQueue(orm, false);
  await expectIndexOnly(orm, 'stale statistics');
});

test("on an analyzed table, each count of a place reads only the queue's index", async () => {
  const orm = await testOrm();
  await fillQueue(orm, true);
  await expectIndexOnly(orm, 'analyzed');
});

test('on a vacuumed table a place reads no row of the runs table', async () => {
  const orm = await testOrm();
  for (const [name, plan] of Object.entries(await plans(orm, 'force_custom_plan', true))) {
    assert.match(plan, /Heap Fetches: 0/, `${name}:\n${plan}`);
  }
});

test.run();
