import { randomUUID } from 'node:crypto';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { fundRun } from '../../src/billing/fund-run.ts';
import type { Em, Orm } from '../../src/db/orm.ts';
import type { Finished } from '../../src/domain/graph/interpreter.ts';
import { completeRun } from '../../src/runs/complete-run.ts';
import type { RunsDeps } from '../../src/runs/deps.ts';
import { finishRun } from '../../src/runs/finish-run.ts';
import { runMeta } from '../../src/runs/run-state.ts';
import { FINISH_RUNS_IN_MEMORY } from '../../src/sql/finish-runs-in-memory.ts';
import { chargeFor } from '../../src/domain/run-steps.ts';
import { resetDb, testOrm } from '../helpers/db.ts';
import { testRunsDeps } from '../helpers/runs-deps.ts';
import { statementsWhile } from '../helpers/statement-log.ts';

/**
 * A run computed in memory is started, finished and settled in ONE statement (FINISH_RUNS_IN_MEMORY):
 * in every case of the money rules it must leave the money a run funded at preparation and finished by
 * finishRun leaves (the hold taken and released at once reads as a hold taken earlier), write the
 * webhook outbox of its terminal event as finishRun writes it, and write nothing for a run it
 * cannot start (a fence, or a wallet that does not cover the hold).
 */

const t = suite<{ orm: Orm; deps: RunsDeps }>('a run computed in memory, finished in one statement');
t.before(async (ctx) => {
  ctx.orm = await testOrm();
  ctx.deps = testRunsDeps(ctx.orm);
});
t.before.each(async ({ orm }) => resetDb(orm));

interface Case {
  wallet: string;
  displayed: string;
  creator: string;
  bundle?: boolean;
  finished: Finished;
}

const COMPLETED: Finished = { status: 'completed', outcome: 'completed', reason: null, outputs: [{ name: 'out', type: 'text', value: 'x' }] as never };
const WITH_ISSUES: Finished = { status: 'completed', outcome: 'completed_with_issues', reason: null, outputs: [] };
const FAILED: Finished = { status: 'failed', outcome: null, reason: 'a node failed', outputs: [] };

type Made = { runId: string; accountId: string; workflowId: string; versionId: string };

/** An account (with an endpoint or not), its wallet, a workflow, a bundle if asked, and an admitted run. */
async function admitted(orm: Orm, c: Case, hooked = false): Promise<Made> {
  const em = orm.em.fork();
  const [accountId, workflowId, versionId, runId] = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
  await em.execute('insert into accounts (id, handle) values (?, ?)', [accountId, `a${accountId.slice(0, 8)}`]);
  await em.execute('insert into wallets (account_id, balance_usd) values (?, ?)', [accountId, c.wallet]);
  await em.execute(`insert into workflows (id, owner_id, name, run_model, listing, credential_mode) values (?, ?, 'w', 'per_run', 'public', 'service_hosted')`, [workflowId, accountId]);
  await em.execute(`insert into workflow_versions (id, workflow_id, label, graph, graph_hash) values (?, ?, 'v1', '{"nodes":[]}', ?)`, [versionId, workflowId, 'x'.repeat(64)]);
  if (c.bundle) {
    await em.execute(`insert into bundles (id, account_id, workflow_id, version_id, runs_total, runs_left, usd_per_run) values (?, ?, ?, ?, 2, 2, 0.02)`, [
      randomUUID(), accountId, workflowId, versionId,
    ]);
  }
  if (hooked) {
    await em.execute(`insert into webhook_endpoints (id, account_id, url, secret_ciphertext) values (?, ?, 'https://127.0.0.1:9/h', 'x')`, [randomUUID(), accountId]);
  }
  await em.execute(
    `insert into runs (id, account_id, workflow_id, version_id, status, phase, user_access, displayed_price_usd, creator_price_usd, step_usd,
                       compute_limit_usd, credential_mode, inputs, progress, last_sequence)
     values (?, ?, ?, ?, 'pending', 'starting', 'wallet', ?, ?, 0.0001, 5, 'service_hosted', '{}', '{"results":{},"timers":{}}', 0)`,
    [runId, accountId, workflowId, versionId, c.displayed, c.creator],
  );
  await runMeta(em as never, runId); // cached, as the engine has it by the time it completes a run
  return { runId, accountId, workflowId, versionId };
}

/** The same run funded at preparation (its hold taken then), started, and finished by finishRun. */
async function prepared(orm: Orm, c: Case, hooked = false): Promise<Made> {
  const m = await admitted(orm, c, hooked);
  const em = orm.em.fork() as unknown as Em;
  await em.transactional((tx) => fundRun(tx as Em, { id: m.runId, ...m, displayedPriceUsd: c.displayed }));
  await em.execute(`update runs set status = 'running', phase = null, started_at = now() where id = ?`, [m.runId]);
  const f = c.finished;
  await em.transactional((tx) => finishRun(tx as Em, m.runId, { status: f.status, outcome: f.outcome, reason: f.reason, outputs: f.outputs, charge: chargeFor(f) }));
  return m;
}

/** What a run's money left, without ids and times. */
async function money(orm: Orm, r: Made) {
  const em = orm.em.fork();
  const all = async (sql: string, p: unknown[]) => (await em.execute(sql, p)).map((x) => Object.values(x).map(String));
  return {
    run: await all(`select status, outcome, reason, phase, billing_status, charge_usd::text, cap_usd::text, funding, hold_usd::text,
                           compute_usd::text, bundle_id is not null, outputs::text from runs where id = ?`, [r.runId]),
    ledger: await all('select kind, amount_usd, balance_after_usd, note from ledger_entries where run_id = ? order by id', [r.runId]),
    wallet: await all('select balance_usd, held_usd from wallets where account_id = ?', [r.accountId]),
    bundles: await all('select runs_left from bundles where account_id = ?', [r.accountId]),
    tally: await all('select coalesce(sum(runs), 0)::int from workflow_run_tallies where workflow_id = ?', [r.workflowId]),
    outbox: await all('select event_type from webhook_deliveries where run_id = ?', [r.runId]),
  };
}

const inMemory = (deps: RunsDeps, runId: string, finished: Finished) => completeRun(deps, runId, finished, [], undefined, { start: true });

/** Each case with the ledger kinds and the bundle's runs left it must end with. */
const CASES: [string, Case, string[], string[]][] = [
  ['a wallet run charged in full', { wallet: '1.000000', displayed: '0.250300', creator: '0.250000', finished: COMPLETED }, ['hold', 'release', 'charge'], []],
  ['a wallet run not charged (failed without compute): the hold back in full', { wallet: '1.000000', displayed: '0.250300', creator: '0.250000', finished: FAILED }, ['hold', 'release'], []],
  ['a completed_with_issues run charged 0', { wallet: '1.000000', displayed: '0.250300', creator: '0.250000', finished: WITH_ISSUES }, ['hold', 'release'], []],
  ['a charge above what the wallet holds: unpaid recorded', { wallet: '0.200000', displayed: '0.100000', creator: '0.500000', finished: COMPLETED }, ['hold', 'release', 'charge', 'unpaid'], []],
  ['a free run: the wallet left alone', { wallet: '1.000000', displayed: '0', creator: '0', finished: COMPLETED }, [], []],
  ['a bundle run charged its price per run', { wallet: '1.000000', displayed: '0.250300', creator: '0.250000', bundle: true, finished: COMPLETED }, [], ['1']],
  ['a bundle run not charged: the bundle run given back', { wallet: '1.000000', displayed: '0.250300', creator: '0.250000', bundle: true, finished: FAILED }, [], ['2']],
];

for (const [name, c, kinds, runsLeft] of CASES) {
  t(`${name}: one statement, the money of a run funded at preparation, the outbox of an account with an endpoint`, async ({ orm, deps }) => {
    for (const hooked of [false, true]) {
      const run = await admitted(orm, c, hooked);
      const { result, sql } = await statementsWhile(orm, () => inMemory(deps, run.runId, c.finished));
      assert.ok(result.completed);
      assert.equal(sql.filter((q) => !/^(begin|commit|rollback)$/i.test(q.trim())), [FINISH_RUNS_IN_MEMORY.text], 'one statement');
      const got = await money(orm, run);
      const want = await money(orm, await prepared(orm, c, hooked));
      // The hold of a run funded at preparation is a ledger row of its own written then: the same amounts and balances.
      assert.equal(got, want);
      assert.equal([got.ledger.map((l) => l[0]), got.bundles.map((b) => b[0])], [kinds, runsLeft]);
      assert.equal(got.outbox, hooked ? [[`run.${c.finished.status}`]] : []);
    }
  });
}

t('the outbox row names the run and its event, stamped no earlier than the run ended, on both ways of finishing', async ({ orm, deps }) => {
  const c = CASES[0]![1];
  const inMemoryRun = await admitted(orm, c, true);
  assert.ok((await inMemory(deps, inMemoryRun.runId, c.finished)).completed);
  for (const run of [inMemoryRun, await prepared(orm, c, true)]) {
    const rows = await orm.em.fork().execute<{ event_type: string; stamped_after_end: boolean }[]>(
      `select d.event_type, d.created_at >= r.completed_at as stamped_after_end from webhook_deliveries d join runs r on r.id = d.run_id where d.run_id = ?`,
      [run.runId],
    );
    assert.equal(rows, [{ event_type: 'run.completed', stamped_after_end: true }]);
  }
});

t('the free run leaves its wallet row unwritten, as settlement always has', async ({ orm, deps }) => {
  const run = await admitted(orm, { wallet: '1.000000', displayed: '0', creator: '0', finished: COMPLETED });
  const stamp = async () => (await orm.em.fork().execute('select updated_at::text as u from wallets where account_id = ?', [run.accountId]))[0]!.u;
  const before = await stamp();
  assert.ok((await inMemory(deps, run.runId, COMPLETED)).completed);
  assert.is(await stamp(), before);
});

t('a wallet that does not cover the hold: the statement answers so and writes nothing, the run is left to preparation', async ({ orm, deps }) => {
  const c = { wallet: '0.100000', displayed: '0.250300', creator: '0.250000', finished: COMPLETED };
  for (const hooked of [false, true]) {
    const run = await admitted(orm, c, hooked);
    const untouched = await money(orm, run);
    const [events] = await orm.em.fork().execute('select count(*)::int as n from run_events where run_id = ?', [run.runId]);
    const { sql } = await statementsWhile(orm, async () => assert.not.ok((await inMemory(deps, run.runId, COMPLETED)).completed));
    assert.equal(sql.filter((q) => !/^(begin|commit|rollback)$/i.test(q.trim())), [FINISH_RUNS_IN_MEMORY.text], 'no raise, no retry');
    assert.equal(await money(orm, run), untouched);
    assert.equal(await orm.em.fork().execute('select count(*)::int as n from run_events where run_id = ?', [run.runId]), [events]);
  }
});

t('a run no longer admitted is left alone by the statement', async ({ orm, deps }) => {
  const run = await admitted(orm, { wallet: '1.000000', displayed: '0.250300', creator: '0.250000', finished: COMPLETED });
  await orm.em.fork().execute(`update runs set phase = 'queued' where id = ?`, [run.runId]);
  const before = await money(orm, run);
  assert.not.ok((await inMemory(deps, run.runId, COMPLETED)).completed);
  assert.equal(await money(orm, run), before);
});

t('a run finished twice at once is never in one execution twice: it ends once, the other call finds it started', async ({ orm, deps }) => {
  const run = await admitted(orm, { wallet: '1.000000', displayed: '0.250300', creator: '0.250000', finished: COMPLETED });
  const { result, sql } = await statementsWhile(orm, () => Promise.all([inMemory(deps, run.runId, COMPLETED), inMemory(deps, run.runId, COMPLETED)]));
  assert.equal(result.map((r) => r.completed).sort(), [false, true]);
  assert.is(sql.filter((q) => q === FINISH_RUNS_IN_MEMORY.text).length, 2, 'two executions');
  assert.equal((await money(orm, run)).ledger.map((l) => l[0]), ['hold', 'release', 'charge']);
});

t.run();
