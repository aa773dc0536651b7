import { randomUUID } from 'node:crypto';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { Em, Orm } from '../../src/db/orm.ts';
import type { Finished } from '../../src/domain/graph/interpreter.ts';
import { completeRun } from '../../src/runs/complete-run.ts';
import type { RunsDeps } from '../../src/runs/deps.ts';
import { finishRun, type Finish } from '../../src/runs/finish-run.ts';
import { failForComputeLimit } from '../../src/runs/record-step.ts';
import { runMeta } from '../../src/runs/run-state.ts';
import { FINISH_RUNS } from '../../src/sql/finish-runs.ts';
import { resetDb, testOrm, insertWorkflow } from '../helpers/db.ts';
import { replaceFunctions } from '../helpers/sql-functions.ts';
import { testRunsDeps } from '../helpers/runs-deps.ts';
import { statementsWhile } from '../helpers/statement-log.ts';

/**
 * The charge of a run is defined once, by the SQL functions `wr_run_charge` and `wr_billed`
 * (src/db/entities/routines.ts, docs/design/money.md). This suite replaces them with other price rules
 * (every charge 1 more, a bundle run billed 10 more than its price per run) and finishes runs down every
 * path: finishRun, the one-statement run of a run computed in memory (alone, with its outbox, and several
 * runs in one execution), a bundle run, the compute limit, completed_with_issues. Each must bill the
 * new amounts and settle them (ledger, wallet); the original functions are put back afterwards.
 */

const t = suite<{ orm: Orm; deps: RunsDeps; restore: () => Promise<void> }>('the charge of a run, defined once');

const CHARGE_PLUS_ONE = `create or replace function wr_run_charge(charged text, status text, creator_price numeric, compute numeric) returns numeric
  immutable language sql as $$ select round(case when charged = 'full' then creator_price + compute + 1
  when charged = 'compute' and (compute <> 0 or status = 'completed') then compute + 1 when status = 'completed' then 1 end, 6) $$`;
const BUNDLE_PLUS_TEN = `create or replace function wr_billed(charge numeric, bundle_price numeric) returns numeric
  immutable language sql as $$ select case when charge is not null then coalesce(bundle_price + 10, charge) end $$`;

t.before(async (ctx) => {
  ctx.orm = await testOrm();
  ctx.deps = testRunsDeps(ctx.orm);
  ctx.restore = await replaceFunctions(ctx.orm, ['wr_run_charge', 'wr_billed'], [CHARGE_PLUS_ONE, BUNDLE_PLUS_TEN]);
});
t.after(async ({ restore }) => restore());
t.before.each(async ({ orm }) => resetDb(orm));

interface Fixture {
  runId: string;
  accountId: string;
  workflowId: string;
  bundleId: string | null;
}

/**
 * An account with a 5 USD wallet (an endpoint for its runs' terminal events when `hooked`), a workflow,
 * and a run with creator price 0.25: `running` with `compute` used and its displayed price 0.25 held, or
 * paid by a bundle of price 0.02 per run; `admitted`: pending and admitted, for the paths that start and
 * finish it at once (a bundle, when asked, then has a run left).
 */
async function fixture(orm: Orm, o: { admitted?: boolean; bundle?: boolean; hooked?: boolean; compute?: string; limit?: string } = {}): Promise<Fixture> {
  const em = orm.em.fork();
  const [accountId, workflowId, versionId, runId] = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
  const bundleId = o.bundle ? randomUUID() : null;
  const heldByRun = !o.admitted && !o.bundle ? '0.250000' : '0';
  await em.execute('insert into accounts (id, handle) values (?, ?)', [accountId, `a${accountId.slice(0, 8)}`]);
  await em.execute('insert into wallets (account_id, balance_usd, held_usd) values (?, ?, ?)', [
    accountId,
    o.admitted || o.bundle ? '5.000000' : '4.750000',
    heldByRun,
  ]);
  await insertWorkflow(em, { id: workflowId, ownerId: accountId, versionId, runModel: 'per_run' });
  if (bundleId) {
    await em.execute(`insert into bundles (id, account_id, workflow_id, version_id, runs_total, runs_left, usd_per_run) values (?, ?, ?, ?, 1, ?, 0.02)`, [
      bundleId,
      accountId,
      workflowId,
      versionId,
      o.admitted ? 1 : 0,
    ]);
  }
  if (o.hooked) {
    await em.execute(`insert into webhook_endpoints (id, account_id, url, secret_ciphertext) values (?, ?, 'https://127.0.0.1:9/h', 'x')`, [
      randomUUID(),
      accountId,
    ]);
  }
  const [status, phase, funding] = o.admitted ? ['pending', 'starting', null] : ['running', null, bundleId ? 'bundle' : 'wallet'];
  await em.execute(
    `insert into runs (id, account_id, workflow_id, version_id, status, phase, user_access, displayed_price_usd, creator_price_usd, step_usd,
                       compute_limit_usd, compute_usd, funding, bundle_id, hold_usd, credential_mode, inputs, progress, last_sequence)
     values (?, ?, ?, ?, ?, ?, 'wallet', 0.25, 0.25, 0.0001, ?, ?, ?, ?, ?, 'service_hosted', '{}', '{"results":{},"timers":{}}', 0)`,
    [runId, accountId, workflowId, versionId, status, phase, o.limit ?? '5', o.compute ?? '0', funding, o.admitted ? null : bundleId, heldByRun],
  );
  await runMeta(em as never, runId);
  return { runId, accountId, workflowId, bundleId };
}

/** What the run was billed and what its money left: ledger kinds and amounts, the wallet, the bundle's runs left. */
async function billed(orm: Orm, f: Fixture) {
  const em = orm.em.fork();
  const [run] = await em.execute<{ billing_status: string; charge_usd: string | null; cap_usd: string }[]>(
    'select billing_status, charge_usd::text, cap_usd::text from runs where id = ?',
    [f.runId],
  );
  const ledger = await em.execute<{ kind: string; amount_usd: string }[]>('select kind, amount_usd::text from ledger_entries where run_id = ? order by id', [
    f.runId,
  ]);
  const [wallet] = await em.execute<{ balance_usd: string; held_usd: string }[]>('select balance_usd::text, held_usd::text from wallets where account_id = ?', [
    f.accountId,
  ]);
  const bundle = f.bundleId ? await em.execute<{ runs_left: number }[]>('select runs_left from bundles where id = ?', [f.bundleId]) : [];
  return {
    ...run!,
    ledger: ledger.map((l) => `${l.kind} ${l.amount_usd}`),
    wallet: [wallet!.balance_usd, wallet!.held_usd],
    bundleRunsLeft: bundle.map((b) => Number(b.runs_left)),
  };
}

const finish = (orm: Orm, runId: string, fin: Finish) => orm.em.fork().transactional((tx) => finishRun(tx as unknown as Em, runId, fin));

const COMPLETED: Finished = { status: 'completed', outcome: 'completed', reason: null, outputs: [] };
const WITH_ISSUES: Finished = { status: 'completed', outcome: 'completed_with_issues', reason: null, outputs: [] };

t('finishRun: a completed run is billed the changed full price, and its wallet pays it', async ({ orm }) => {
  const f = await fixture(orm, { compute: '0.000300' });
  assert.ok(await finish(orm, f.runId, { status: 'completed', outcome: 'completed', charge: 'full' }));
  assert.equal(await billed(orm, f), {
    billing_status: 'settled',
    charge_usd: '1.250300',
    cap_usd: '1.250300',
    ledger: ['release 0.250000', 'charge -1.250300'],
    wallet: ['3.749700', '0.000000'],
    bundleRunsLeft: [],
  });
});

t('finishRun: completed_with_issues is billed the changed compute-only charge', async ({ orm }) => {
  const f = await fixture(orm, { compute: '0.000300' });
  assert.ok(await finish(orm, f.runId, { status: 'completed', outcome: 'completed_with_issues', charge: 'compute' }));
  const b = await billed(orm, f);
  assert.equal([b.charge_usd, b.ledger], ['1.000300', ['release 0.250000', 'charge -1.000300']]);
});

t('the compute limit: the run stopped by it is billed the changed compute charge', async ({ orm, deps }) => {
  const f = await fixture(orm, { compute: '0.000300', limit: '0.000350' });
  assert.equal(await failForComputeLimit(deps, f.runId, 'next'), { type: 'not_runnable', status: 'failed' });
  const b = await billed(orm, f);
  assert.equal([b.billing_status, b.charge_usd, b.ledger], ['settled', '1.000300', ['release 0.250000', 'charge -1.000300']]);
});

t('finishRun: a bundle run is billed the changed bundle price, its wallet untouched; a cancelled run is still not charged', async ({ orm }) => {
  const f = await fixture(orm, { bundle: true, compute: '0.000300' });
  assert.ok(await finish(orm, f.runId, { status: 'completed', outcome: 'completed', charge: 'full' }));
  assert.equal(await billed(orm, f), {
    billing_status: 'settled',
    charge_usd: '10.020000',
    cap_usd: '10.020000',
    ledger: [],
    wallet: ['5.000000', '0.000000'],
    bundleRunsLeft: [0],
  });
  const cancelled = await fixture(orm, { compute: '0.000300' });
  assert.ok(await finish(orm, cancelled.runId, { status: 'cancelled', charge: 'none' }));
  const c = await billed(orm, cancelled);
  assert.equal([c.billing_status, c.charge_usd, c.ledger], ['not_charged', null, ['release 0.250000']]);
});

t('the one-statement run, with or without its outbox, bills the changed charges', async ({ orm, deps }) => {
  const cases: [{ hooked?: boolean; bundle?: boolean }, Finished, string, string[]][] = [
    [{}, COMPLETED, '1.250000', ['hold -0.250000', 'release 0.250000', 'charge -1.250000']],
    [{}, WITH_ISSUES, '1.000000', ['hold -0.250000', 'release 0.250000', 'charge -1.000000']],
    [{ hooked: true }, COMPLETED, '1.250000', ['hold -0.250000', 'release 0.250000', 'charge -1.250000']],
    [{ hooked: true }, WITH_ISSUES, '1.000000', ['hold -0.250000', 'release 0.250000', 'charge -1.000000']],
    [{ bundle: true }, COMPLETED, '10.020000', []],
    [{ bundle: true, hooked: true }, WITH_ISSUES, '10.020000', []],
  ];
  for (const [o, finished, charge, ledger] of cases) {
    const f = await fixture(orm, { admitted: true, ...o });
    const { result, sql } = await statementsWhile(orm, () => completeRun(deps, f.runId, finished, [], undefined, { start: true }));
    assert.ok(result.completed);
    assert.ok(sql.includes(FINISH_RUNS.text), `${JSON.stringify(o)}: the path under test`);
    const outbox = await orm.em.fork().execute('select 1 from webhook_deliveries where run_id = ?', [f.runId]);
    assert.is(outbox.length, o.hooked ? 1 : 0, `${JSON.stringify(o)}: the outbox row`);
    const b = await billed(orm, f);
    assert.equal([b.charge_usd, b.ledger, b.bundleRunsLeft], [charge, ledger, o.bundle ? [0] : []], `${JSON.stringify(o)} ${finished.outcome}`);
  }
});

t('runs finishing together in one execution of the statement bill the changed charges', async ({ orm, deps }) => {
  const runs = await Promise.all([0, 1, 2, 3].map(() => fixture(orm, { admitted: true })));
  const { result, sql } = await statementsWhile(orm, () =>
    Promise.all(runs.map((f, i) => completeRun(deps, f.runId, i % 2 ? WITH_ISSUES : COMPLETED, [], undefined, { start: true }))),
  );
  assert.equal(
    result.map((r) => r.completed),
    [true, true, true, true],
  );
  assert.is(sql.filter((q) => q === FINISH_RUNS.text).length, 1, 'one execution for the four');
  const [one] = await orm.em.fork().execute<{ n: number }[]>(
    'select count(distinct xmin::text)::int as n from runs where id in (?, ?, ?, ?)',
    runs.map((f) => f.runId),
  );
  assert.is(Number(one!.n), 1, 'one transaction');
  const got = await Promise.all(runs.map((f) => billed(orm, f)));
  assert.equal(
    got.map((b) => [b.charge_usd, b.ledger.at(-1)]),
    [
      ['1.250000', 'charge -1.250000'],
      ['1.000000', 'charge -1.000000'],
      ['1.250000', 'charge -1.250000'],
      ['1.000000', 'charge -1.000000'],
    ],
  );
});

t.run();
