import { randomUUID } from 'node:crypto';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { Em, Orm } from '../../src/db/orm.ts';
import { fundRun, INSUFFICIENT_FUNDS } from '../../src/billing/fund-run.ts';
import { type SettleInput, settleRun } from '../../src/billing/settle-run.ts';
import { resetDb, testOrm } from '../helpers/db.ts';
import { RUNS_COUNT_SQL } from '../../src/catalog/workflow-access.ts';
import { statementsWhile } from '../helpers/statement-log.ts';

const t = suite<{ orm: Orm }>('billing: funding and settlement');
t.before(async (ctx) => {
  ctx.orm = await testOrm();
});
t.before.each(async ({ orm }) => resetDb(orm));

interface Fixture {
  accountId: string;
  workflowId: string;
  versionId: string;
  runId: string;
}

async function fixture(em: Em, walletUsd: string): Promise<Fixture> {
  const f = { accountId: randomUUID(), workflowId: randomUUID(), versionId: randomUUID(), runId: randomUUID() };
  await em.execute(`insert into accounts (id, handle) values (?, ?)`, [f.accountId, `a${f.accountId.slice(0, 8)}`]);
  await em.execute(`insert into wallets (account_id, balance_usd) values (?, ?)`, [f.accountId, walletUsd]);
  await em.execute(`insert into workflows (id, owner_id, name, run_model, listing, credential_mode) values (?, ?, 'w', 'free', 'public', 'service_hosted')`, [f.workflowId, f.accountId]);
  await em.execute(`insert into workflow_versions (id, workflow_id, label, graph, graph_hash) values (?, ?, 'v1', '{"nodes":[]}', ?)`, [f.versionId, f.workflowId, 'x'.repeat(64)]);
  await em.execute(
    `insert into runs (id, account_id, workflow_id, version_id, user_access, compute_limit_usd, credential_mode, inputs, progress)
     values (?, ?, ?, ?, 'wallet', 5, 'service_hosted', '{}', '{"results":{},"timers":{}}')`,
    [f.runId, f.accountId, f.workflowId, f.versionId],
  );
  return f;
}

const wallet = async (em: Em, accountId: string) =>
  (await em.execute<{ balance_usd: string; held_usd: string }[]>('select balance_usd, held_usd from wallets where account_id = ?', [accountId]))[0]!;
const ledger = async (em: Em, accountId: string) =>
  (await em.execute<{ kind: string; amount_usd: string; balance_after_usd: string }[]>(
    'select kind, amount_usd, balance_after_usd from ledger_entries where account_id = ? order by id',
    [accountId],
  )).map((r) => [r.kind, r.amount_usd, r.balance_after_usd]);

t('a hold moves the displayed price from balance to held, and settlement charges the exact final amount', async ({ orm }) => {
  const em = orm.em.fork() as unknown as Em;
  const f = await fixture(em, '1.000000');
  const funded = await em.transactional((tx) => fundRun(tx as Em, { id: f.runId, ...f, displayedPriceUsd: '0.250200' }));
  assert.equal(funded, { ok: true, funding: 'wallet', holdUsd: '0.250200' });
  assert.equal(await wallet(em, f.accountId), { balance_usd: '0.749800', held_usd: '0.250200' });
  await em.transactional((tx) =>
    settleRun(tx as Em, { id: f.runId, accountId: f.accountId, funding: 'wallet', bundleId: null, holdUsd: '0.250200' }, '0.250357'),
  );
  assert.equal(await wallet(em, f.accountId), { balance_usd: '0.749643', held_usd: '0.000000' });
  assert.equal(await ledger(em, f.accountId), [
    ['hold', '-0.250200', '0.749800'],
    ['release', '0.250200', '1.000000'],
    ['charge', '-0.250357', '0.749643'],
  ]);
});

t('a wallet never goes below zero: what it cannot cover is recorded as unpaid', async ({ orm }) => {
  const em = orm.em.fork() as unknown as Em;
  const f = await fixture(em, '1.000000');
  await em.transactional((tx) => fundRun(tx as Em, { id: f.runId, ...f, displayedPriceUsd: '0.500000' }));
  await em.transactional((tx) =>
    settleRun(tx as Em, { id: f.runId, accountId: f.accountId, funding: 'wallet', bundleId: null, holdUsd: '0.500000' }, '2.000000'),
  );
  assert.equal(await wallet(em, f.accountId), { balance_usd: '0.000000', held_usd: '0.000000' });
  assert.equal((await ledger(em, f.accountId)).slice(1), [
    ['release', '0.500000', '1.000000'],
    ['charge', '-1.000000', '0.000000'],
    ['unpaid', '1.000000', '0.000000'],
  ]);
});

t('a run not charged gets its hold back in full', async ({ orm }) => {
  const em = orm.em.fork() as unknown as Em;
  const f = await fixture(em, '0.300000');
  await em.transactional((tx) => fundRun(tx as Em, { id: f.runId, ...f, displayedPriceUsd: '0.300000' }));
  assert.is((await wallet(em, f.accountId)).balance_usd, '0.000000');
  await em.transactional((tx) =>
    settleRun(tx as Em, { id: f.runId, accountId: f.accountId, funding: 'wallet', bundleId: null, holdUsd: '0.300000' }, null),
  );
  assert.equal(await wallet(em, f.accountId), { balance_usd: '0.300000', held_usd: '0.000000' });
});

t('insufficient balance funds nothing and leaves no ledger row', async ({ orm }) => {
  const em = orm.em.fork() as unknown as Em;
  const f = await fixture(em, '0.100000');
  const funded = await em.transactional((tx) => fundRun(tx as Em, { id: f.runId, ...f, displayedPriceUsd: '0.100001' }));
  assert.equal(funded, { ok: false, reason: INSUFFICIENT_FUNDS });
  assert.equal(await wallet(em, f.accountId), { balance_usd: '0.100000', held_usd: '0.000000' });
  assert.equal(await ledger(em, f.accountId), []);
});

// What a bundle run is billed (its price per run) is wr_billed's (test/db/run-charge.test.ts): the settlement takes that amount.
t('a bundle pays before the wallet, its charged run stays consumed, and it gives the run back when not charged', async ({ orm }) => {
  const em = orm.em.fork() as unknown as Em;
  const f = await fixture(em, '1.000000');
  const bundleId = randomUUID();
  await em.execute(
    `insert into bundles (id, account_id, workflow_id, version_id, runs_total, runs_left, usd_per_run) values (?, ?, ?, ?, 1, 1, 0.2)`,
    [bundleId, f.accountId, f.workflowId, f.versionId],
  );
  const funded = await em.transactional((tx) => fundRun(tx as Em, { id: f.runId, ...f, displayedPriceUsd: '0.250000' }));
  assert.is(funded.ok && funded.funding, 'bundle');
  const left = async () => Number((await em.execute<{ runs_left: number }[]>('select runs_left from bundles where id = ?', [bundleId]))[0]!.runs_left);
  assert.is(await left(), 0);
  const settle = { id: f.runId, accountId: f.accountId, funding: 'bundle', bundleId, holdUsd: '0' };
  await em.transactional((tx) => settleRun(tx as Em, settle, '0.200000'));
  assert.is(await left(), 0);
  await em.transactional((tx) => settleRun(tx as Em, settle, null));
  assert.is(await left(), 1);
  assert.equal(await wallet(em, f.accountId), { balance_usd: '1.000000', held_usd: '0.000000' });
});

t('concurrent holds against a wallet that covers exactly one fund exactly one', async ({ orm }) => {
  const em = orm.em.fork() as unknown as Em;
  const f = await fixture(em, '0.250000');
  const runs = [f.runId];
  for (let i = 0; i < 7; i++) {
    const id = randomUUID();
    await em.execute(
      `insert into runs (id, account_id, workflow_id, version_id, user_access, compute_limit_usd, credential_mode, inputs, progress)
       values (?, ?, ?, ?, 'wallet', 5, 'service_hosted', '{}', '{"results":{},"timers":{}}')`,
      [id, f.accountId, f.workflowId, f.versionId],
    );
    runs.push(id);
  }
  const results = await Promise.all(
    runs.map((id) => orm.em.fork().transactional((tx) => fundRun(tx as unknown as Em, { id, ...f, displayedPriceUsd: '0.250000' }))),
  );
  assert.is(results.filter((r) => r.ok).length, 1);
  assert.equal(await wallet(em, f.accountId), { balance_usd: '0.000000', held_usd: '0.250000' });
});


const runFunding = async (em: Em, runId: string) =>
  (await em.execute<{ funding: string | null; bundle_id: string | null; hold_usd: string | null }[]>(
    'select funding, bundle_id, hold_usd from runs where id = ?',
    [runId],
  ))[0]!;

async function addRun(em: Em, f: Fixture): Promise<string> {
  const id = randomUUID();
  await em.execute(
    `insert into runs (id, account_id, workflow_id, version_id, user_access, compute_limit_usd, credential_mode, inputs, progress)
     values (?, ?, ?, ?, 'wallet', 5, 'service_hosted', '{}', '{"results":{},"timers":{}}')`,
    [id, f.accountId, f.workflowId, f.versionId],
  );
  return id;
}

async function addBundle(em: Em, f: Fixture, runsLeft: number): Promise<string> {
  const id = randomUUID();
  await em.execute(
    `insert into bundles (id, account_id, workflow_id, version_id, runs_total, runs_left, usd_per_run) values (?, ?, ?, ?, ?, ?, 0.2)`,
    [id, f.accountId, f.workflowId, f.versionId, runsLeft, runsLeft],
  );
  return id;
}

t('funding is one statement whether a bundle, a hold, a free run or nothing funds the run', async ({ orm }) => {
  const em = orm.em.fork() as unknown as Em;
  const f = await fixture(em, '0.300000');
  const fund = (id: string, price: string) =>
    em.transactional((tx) => statementsWhile(orm, () => fundRun(tx as Em, { id, ...f, displayedPriceUsd: price })));

  const bundleId = await addBundle(em, f, 1);
  const byBundle = await fund(f.runId, '0.250000');
  assert.equal(byBundle.result, { ok: true, funding: 'bundle', holdUsd: '0.000000' });
  assert.is(byBundle.sql.length, 1);
  assert.equal(await runFunding(em, f.runId), { funding: 'bundle', bundle_id: bundleId, hold_usd: '0.000000' });
  assert.equal(await wallet(em, f.accountId), { balance_usd: '0.300000', held_usd: '0.000000' });

  const held = await addRun(em, f);
  const byWallet = await fund(held, '0.250000');
  assert.equal(byWallet.result, { ok: true, funding: 'wallet', holdUsd: '0.250000' });
  assert.is(byWallet.sql.length, 1);
  assert.equal(await runFunding(em, held), { funding: 'wallet', bundle_id: null, hold_usd: '0.250000' });
  assert.equal(await wallet(em, f.accountId), { balance_usd: '0.050000', held_usd: '0.250000' });

  const free = await addRun(em, f);
  const walletBefore = await em.execute('select * from wallets where account_id = ?', [f.accountId]);
  const byNothing = await fund(free, '0');
  assert.equal(byNothing.result, { ok: true, funding: 'wallet', holdUsd: '0.000000' });
  assert.is(byNothing.sql.length, 1);
  assert.equal(await runFunding(em, free), { funding: 'wallet', bundle_id: null, hold_usd: '0.000000' });
  assert.equal(await em.execute('select * from wallets where account_id = ?', [f.accountId]), walletBefore, 'a free run leaves the wallet alone');

  const short = await addRun(em, f);
  const refused = await fund(short, '0.050001');
  assert.equal(refused.result, { ok: false, reason: INSUFFICIENT_FUNDS });
  assert.is(refused.sql.length, 1);
  assert.equal(await runFunding(em, short), { funding: null, bundle_id: null, hold_usd: '0.000000' });
  assert.equal(await wallet(em, f.accountId), { balance_usd: '0.050000', held_usd: '0.250000' });
  assert.equal(await ledger(em, f.accountId), [['hold', '-0.250000', '0.050000']], 'only the hold wrote a ledger row');
});

t('a bundle pays a free run too, and an empty bundle falls through to the wallet in the same statement', async ({ orm }) => {
  const em = orm.em.fork() as unknown as Em;
  const f = await fixture(em, '1.000000');
  const bundleId = await addBundle(em, f, 1);
  const fund = (id: string, price: string) => em.transactional((tx) => fundRun(tx as Em, { id, ...f, displayedPriceUsd: price }));
  assert.equal(await fund(f.runId, '0'), { ok: true, funding: 'bundle', holdUsd: '0.000000' });
  assert.equal(await runFunding(em, f.runId), { funding: 'bundle', bundle_id: bundleId, hold_usd: '0.000000' });
  const next = await addRun(em, f);
  assert.equal(await fund(next, '0.400000'), { ok: true, funding: 'wallet', holdUsd: '0.400000' });
  assert.equal(await runFunding(em, next), { funding: 'wallet', bundle_id: null, hold_usd: '0.400000' });
  assert.equal(await ledger(em, f.accountId), [['hold', '-0.400000', '0.600000']]);
});

t('settling a completed run bumps its workflow run counter exactly once, in the one settlement statement', async ({ orm }) => {
  const em = orm.em.fork() as unknown as Em;
  const f = await fixture(em, '1.000000');
  const runsCount = async () =>
    Number((await em.execute<{ runs_count: number }[]>(`select ${RUNS_COUNT_SQL} as runs_count from workflows w where id = ?`, [f.workflowId]))[0]!.runs_count);
  const settle = (run: SettleInput, charge: string | null) =>
    em.transactional((tx) => statementsWhile(orm, () => settleRun(tx as Em, run, charge, { countCompletedRunOf: f.workflowId })));
  const held = await addRun(em, f);
  await em.transactional((tx) => fundRun(tx as Em, { id: held, ...f, displayedPriceUsd: '0.250200' }));
  const bundleId = await addBundle(em, f, 1);
  const left = async () => Number((await em.execute<{ runs_left: number }[]>('select runs_left from bundles where id = ?', [bundleId]))[0]!.runs_left);
  const bundleRun = { id: f.runId, accountId: f.accountId, funding: 'bundle', bundleId, holdUsd: '0' };

  const bundleCharged = await settle(bundleRun, '0.200000');
  assert.equal([bundleCharged.sql.length, await runsCount(), await left()], [1, 1, 1]);

  const bundleRefunded = await settle(bundleRun, null);
  assert.equal([bundleRefunded.sql.length, await runsCount(), await left()], [1, 2, 2]);

  const byWallet = await settle({ id: held, accountId: f.accountId, funding: 'wallet', bundleId: null, holdUsd: '0.250200' }, '1.250357');
  assert.equal([byWallet.sql.length, await runsCount()], [1, 3]);
  assert.equal(await wallet(em, f.accountId), { balance_usd: '0.000000', held_usd: '0.000000' });
  assert.equal(await ledger(em, f.accountId), [
    ['hold', '-0.250200', '0.749800'],
    ['release', '0.250200', '1.000000'],
    ['charge', '-1.000000', '0.000000'],
    ['unpaid', '0.250357', '0.000000'],
  ]);

  const free = await settle({ id: await addRun(em, f), accountId: f.accountId, funding: 'wallet', bundleId: null, holdUsd: '0.000000' }, '0.000000');
  assert.equal([free.sql.length, await runsCount()], [1, 4]);
  assert.equal(await wallet(em, f.accountId), { balance_usd: '0.000000', held_usd: '0.000000' });
  assert.is((await ledger(em, f.accountId)).length, 4);
});

t('without a run to count, settlement issues what it always did', async ({ orm }) => {
  const em = orm.em.fork() as unknown as Em;
  const f = await fixture(em, '1.000000');
  const settle = (run: SettleInput, charge: string | null) => em.transactional((tx) => statementsWhile(orm, () => settleRun(tx as Em, run, charge)));
  const bundleId = await addBundle(em, f, 0);
  const bundleRun = { id: f.runId, accountId: f.accountId, funding: 'bundle', bundleId, holdUsd: '0' };
  assert.is((await settle(bundleRun, '0.200000')).sql.length, 0);
  assert.is((await settle(bundleRun, null)).sql.length, 1);
  assert.is((await settle({ ...bundleRun, funding: 'wallet', bundleId: null }, '0')).sql.length, 0);
  assert.is((await settle({ ...bundleRun, funding: 'wallet', bundleId: null, holdUsd: '0.100000' }, null)).sql.length, 1);
  const count = await em.execute<{ runs_count: number }[]>(`select ${RUNS_COUNT_SQL} as runs_count from workflows w where id = ?`, [f.workflowId]);
  assert.is(Number(count[0]!.runs_count), 0);
});

t.run();
