import { randomUUID } from 'node:crypto';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { Orm } from '../../src/db/orm.ts';
import type { Finished } from '../../src/domain/graph/interpreter.ts';
import { completeRun } from '../../src/runs/complete-run.ts';
import type { RunsDeps } from '../../src/runs/deps.ts';
import { runMeta } from '../../src/runs/run-state.ts';
import { resetDb, testOrm } from '../helpers/db.ts';
import { testRunsDeps } from '../helpers/runs-deps.ts';
import { statementsWhile } from '../helpers/statement-log.ts';

/**
 * The one-statement run (START_FINISH_AND_SETTLE) against the path it replaces when the account has no
 * endpoint (START_AND_FINISH, the outbox, the settlement): twin runs, one of an account without an
 * endpoint and one of an account with one, must leave the same rows in every case of the money rules.
 */

const t = suite<{ orm: Orm; deps: RunsDeps }>('one-statement run against the outbox path');
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

const COMPLETED: Finished = { status: 'completed', outcome: 'completed', reason: null, outputs: [] };
const WITH_ISSUES: Finished = { status: 'completed', outcome: 'completed_with_issues', reason: null, outputs: [] };
const FAILED: Finished = { status: 'failed', outcome: null, reason: 'a node failed', outputs: [] };

/** An account (with an endpoint or not), its wallet, a workflow, a bundle if asked, and an admitted run. */
async function twin(orm: Orm, c: Case, hooked: boolean): Promise<{ runId: string; accountId: string; workflowId: string }> {
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
  return { runId, accountId, workflowId };
}

/** What a run left, without ids and times. */
async function rows(orm: Orm, r: { runId: string; accountId: string; workflowId: string }) {
  const em = orm.em.fork();
  const one = async (sql: string) => (await em.execute(sql, [r.runId]))[0];
  const all = async (sql: string, p: unknown[]) => (await em.execute(sql, p)).map((x) => Object.values(x).map(String));
  return {
    run: await one(`select status, outcome, reason, phase, billing_status, charge_usd::text, cap_usd::text, funding, hold_usd::text,
                           compute_usd::text, bundle_id is not null as bundled, last_sequence from runs where id = ?`),
    events: await all('select sequence, type, node_id, data from run_events where run_id = ? order by sequence', [r.runId]),
    ledger: await all('select kind, amount_usd, balance_after_usd, note from ledger_entries where run_id = ? order by id', [r.runId]),
    wallet: await all('select balance_usd, held_usd from wallets where account_id = ?', [r.accountId]),
    bundles: await all('select runs_left from bundles where account_id = ?', [r.accountId]),
    tally: await all('select coalesce(sum(runs), 0)::int from workflow_run_tallies where workflow_id = ?', [r.workflowId]),
  };
}

/** Completes both twins; the statements the one without an endpoint sent. */
async function both(orm: Orm, deps: RunsDeps, c: Case) {
  const alone = await twin(orm, c, false);
  const hooked = await twin(orm, c, true);
  const { result: first, sql } = await statementsWhile(orm, () => completeRun(deps, alone.runId, c.finished, [], undefined, { start: true }));
  const done = [first.completed, (await completeRun(deps, hooked.runId, c.finished, [], undefined, { start: true })).completed];
  const outbox = await orm.em.fork().execute('select run_id from webhook_deliveries');
  return { done, sql: sql.filter((q) => !/^(begin|commit|rollback)$/i.test(q.trim())), alone: await rows(orm, alone), hooked: await rows(orm, hooked), outbox: outbox.map((o) => o.run_id), ids: [alone.runId, hooked.runId] };
}

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
  t(`${name}: one statement, the same rows as the outbox path`, async ({ orm, deps }) => {
    const r = await both(orm, deps, c);
    assert.equal(r.done, [true, true]);
    assert.is(r.sql.length, 1, r.sql.map((s) => s.slice(0, 60)).join('\n'));
    assert.match(r.sql[0]!, /^\/\* with commit \*\/ with f0 as/);
    assert.equal(r.alone, r.hooked);
    assert.equal([r.alone.ledger.map((l) => l[0]), r.alone.bundles.map((b) => b[0])], [kinds, runsLeft]);
    assert.equal(r.outbox, [r.ids[1]], 'only the run with an endpoint has an outbox row');
  });
}

t('the free run leaves its wallet row unwritten, as settlement always has', async ({ orm, deps }) => {
  const alone = await twin(orm, { wallet: '1.000000', displayed: '0', creator: '0', finished: COMPLETED }, false);
  const stamp = async () => (await orm.em.fork().execute('select updated_at::text as u from wallets where account_id = ?', [alone.accountId]))[0]!.u;
  const before = await stamp();
  assert.ok((await completeRun(deps, alone.runId, COMPLETED, [], undefined, { start: true })).completed);
  assert.is(await stamp(), before);
});

t('a wallet that does not cover the hold: neither path writes anything, the run is left to preparation', async ({ orm, deps }) => {
  const c = { wallet: '0.100000', displayed: '0.250300', creator: '0.250000', bundle: false, finished: COMPLETED };
  const alone = await twin(orm, c, false);
  const untouched = await rows(orm, alone);
  const r = await both(orm, deps, c);
  assert.equal(r.done, [false, false]);
  assert.equal(r.alone.run, { ...untouched.run });
  assert.equal([r.alone.events, r.alone.ledger, r.alone.wallet, r.alone.tally], [[], [], [['0.100000', '0.000000']], [['0']]]);
  assert.equal(r.alone, r.hooked);
  assert.equal(r.outbox, []);
});

t('a run no longer admitted is left alone by the one statement', async ({ orm, deps }) => {
  const alone = await twin(orm, { wallet: '1.000000', displayed: '0.250300', creator: '0.250000', finished: COMPLETED }, false);
  await orm.em.fork().execute(`update runs set phase = 'queued' where id = ?`, [alone.runId]);
  const before = await rows(orm, alone);
  assert.not.ok((await completeRun(deps, alone.runId, COMPLETED, [], undefined, { start: true })).completed);
  assert.equal(await rows(orm, alone), before);
});

t.run();
