import { randomUUID } from 'node:crypto';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { Em, Orm } from '../../src/db/orm.ts';
import { fundRun, INSUFFICIENT_FUNDS } from '../../src/billing/fund-run.ts';
import { finishRun, type Finish } from '../../src/runs/finish-run.ts';
import { resetDb, testOrm, insertWorkflow } from '../helpers/db.ts';
import { RUNS_COUNT_SQL } from '../../src/catalog/workflow-access.ts';
import { statementsWhile } from '../helpers/statement-log.ts';

/**
 * Funding (FUND_RUNS, at preparation) and the money a run's ending moves (FINISH_RUNS): holds, charges,
 * unpaid amounts, bundles, the completed-run tally, each in one statement.
 */

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
  await insertWorkflow(em, { id: f.workflowId, ownerId: f.accountId, versionId: f.versionId });
  await insertRun(em, f, f.runId);
  return f;
}

async function insertRun(em: Em, f: Fixture, id: string): Promise<void> {
  await em.execute(
    `insert into runs (id, account_id, workflow_id, version_id, user_access, compute_limit_usd, credential_mode, inputs, progress)
     values (?, ?, ?, ?, 'wallet', 5, 'service_hosted', '{}', '{"results":{},"timers":{}}')`,
    [id, f.accountId, f.workflowId, f.versionId],
  );
}

/** Funds the run at `price` (its displayed price), in a transaction of its own. */
async function fund(em: Em, runId: string, price: string) {
  await em.execute('update runs set displayed_price_usd = ? where id = ?', [price, runId]);
  return em.transactional((tx) => fundRun(tx as Em, runId));
}

/** Ends the run as completed and charged in full: `owed` its creator price (no compute), or cancelled (`null`: not charged). */
async function end(em: Em, runId: string, owed: string | null, watch: (fn: () => Promise<unknown>) => Promise<unknown> = (fn) => fn()) {
  if (owed !== null) await em.execute(`update runs set creator_price_usd = ?, status = 'running' where id = ?`, [owed, runId]);
  const fin: Finish = owed === null ? { status: 'cancelled', charge: 'none' } : { status: 'completed', outcome: 'completed', charge: 'full' };
  return watch(() => em.transactional((tx) => finishRun(tx as Em, runId, fin)));
}

const wallet = async (em: Em, accountId: string) =>
  (await em.execute<{ balance_usd: string; held_usd: string }[]>('select balance_usd, held_usd from wallets where account_id = ?', [accountId]))[0]!;
const ledger = async (em: Em, accountId: string) =>
  (
    await em.execute<{ kind: string; amount_usd: string; balance_after_usd: string }[]>(
      'select kind, amount_usd, balance_after_usd from ledger_entries where account_id = ? order by id',
      [accountId],
    )
  ).map((r) => [r.kind, r.amount_usd, r.balance_after_usd]);

t('a hold moves the displayed price from balance to held, and settlement charges the exact final amount', async ({ orm }) => {
  const em = orm.em.fork() as unknown as Em;
  const f = await fixture(em, '1.000000');
  const funded = await fund(em, f.runId, '0.250200');
  assert.equal(funded, { ok: true, funding: 'wallet' });
  assert.equal(await wallet(em, f.accountId), { balance_usd: '0.749800', held_usd: '0.250200' });
  await end(em, f.runId, '0.250357');
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
  await fund(em, f.runId, '0.500000');
  await end(em, f.runId, '2.000000');
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
  await fund(em, f.runId, '0.300000');
  assert.is((await wallet(em, f.accountId)).balance_usd, '0.000000');
  await end(em, f.runId, null);
  assert.equal(await wallet(em, f.accountId), { balance_usd: '0.300000', held_usd: '0.000000' });
});

t('insufficient balance funds nothing and leaves no ledger row', async ({ orm }) => {
  const em = orm.em.fork() as unknown as Em;
  const f = await fixture(em, '0.100000');
  const funded = await fund(em, f.runId, '0.100001');
  assert.equal(funded, { ok: false, reason: INSUFFICIENT_FUNDS });
  assert.equal(await wallet(em, f.accountId), { balance_usd: '0.100000', held_usd: '0.000000' });
  assert.equal(await ledger(em, f.accountId), []);
});

// What a bundle run is billed (its price per run) is wr_billed's (test/db/run-charge.test.ts): the settlement takes that amount.
t('a bundle pays before the wallet, its charged run stays consumed, and it gives the run back when not charged', async ({ orm }) => {
  const em = orm.em.fork() as unknown as Em;
  const f = await fixture(em, '1.000000');
  const bundleId = await addBundle(em, f, 2);
  const left = async () => Number((await em.execute<{ runs_left: number }[]>('select runs_left from bundles where id = ?', [bundleId]))[0]!.runs_left);
  const cancelled = await addRun(em, f);
  assert.equal(
    [await fund(em, f.runId, '0.250000'), await fund(em, cancelled, '0.250000')],
    [
      { ok: true, funding: 'bundle' },
      { ok: true, funding: 'bundle' },
    ],
  );
  assert.is(await left(), 0);
  await end(em, f.runId, '0.250000');
  assert.is(await left(), 0);
  await end(em, cancelled, null);
  assert.is(await left(), 1);
  assert.equal(await wallet(em, f.accountId), { balance_usd: '1.000000', held_usd: '0.000000' });
  assert.equal(await ledger(em, f.accountId), []);
  const [charged] = await em.execute<{ charge_usd: string }[]>('select charge_usd::text from runs where id = ?', [f.runId]);
  assert.is(charged!.charge_usd, '0.200000', 'billed its bundle price per run');
});

t('concurrent holds against a wallet that covers exactly one fund exactly one', async ({ orm }) => {
  const em = orm.em.fork() as unknown as Em;
  const f = await fixture(em, '0.250000');
  const runs = [f.runId];
  for (let i = 0; i < 7; i++) runs.push(await addRun(em, f));
  await em.execute('update runs set displayed_price_usd = 0.25 where account_id = ?', [f.accountId]);
  const results = await Promise.all(runs.map((id) => orm.em.fork().transactional((tx) => fundRun(tx as unknown as Em, id))));
  assert.is(results.filter((r) => r.ok).length, 1);
  assert.equal(await wallet(em, f.accountId), { balance_usd: '0.000000', held_usd: '0.250000' });
});

const runFunding = async (em: Em, runId: string) =>
  (
    await em.execute<{ funding: string | null; bundle_id: string | null; hold_usd: string | null }[]>(
      'select funding, bundle_id, hold_usd from runs where id = ?',
      [runId],
    )
  )[0]!;

async function addRun(em: Em, f: Fixture): Promise<string> {
  const id = randomUUID();
  await insertRun(em, f, id);
  return id;
}

async function addBundle(em: Em, f: Fixture, runsLeft: number): Promise<string> {
  const id = randomUUID();
  await em.execute(`insert into bundles (id, account_id, workflow_id, version_id, runs_total, runs_left, usd_per_run) values (?, ?, ?, ?, ?, ?, 0.2)`, [
    id,
    f.accountId,
    f.workflowId,
    f.versionId,
    runsLeft,
    runsLeft,
  ]);
  return id;
}

t('funding is one statement whether a bundle, a hold, a free run or nothing funds the run', async ({ orm }) => {
  const em = orm.em.fork() as unknown as Em;
  const f = await fixture(em, '0.300000');
  const funded = async (id: string, price: string) => {
    await em.execute('update runs set displayed_price_usd = ? where id = ?', [price, id]);
    return em.transactional((tx) => statementsWhile(orm, () => fundRun(tx as Em, id)));
  };

  const bundleId = await addBundle(em, f, 1);
  const byBundle = await funded(f.runId, '0.250000');
  assert.equal(byBundle.result, { ok: true, funding: 'bundle' });
  assert.is(byBundle.sql.length, 1);
  assert.equal(await runFunding(em, f.runId), { funding: 'bundle', bundle_id: bundleId, hold_usd: '0.000000' });
  assert.equal(await wallet(em, f.accountId), { balance_usd: '0.300000', held_usd: '0.000000' });

  const held = await addRun(em, f);
  const byWallet = await funded(held, '0.250000');
  assert.equal(byWallet.result, { ok: true, funding: 'wallet' });
  assert.is(byWallet.sql.length, 1);
  assert.equal(await runFunding(em, held), { funding: 'wallet', bundle_id: null, hold_usd: '0.250000' });
  assert.equal(await wallet(em, f.accountId), { balance_usd: '0.050000', held_usd: '0.250000' });

  const free = await addRun(em, f);
  const walletBefore = await em.execute('select * from wallets where account_id = ?', [f.accountId]);
  const byNothing = await funded(free, '0');
  assert.equal(byNothing.result, { ok: true, funding: 'wallet' });
  assert.is(byNothing.sql.length, 1);
  assert.equal(await runFunding(em, free), { funding: 'wallet', bundle_id: null, hold_usd: '0.000000' });
  assert.equal(await em.execute('select * from wallets where account_id = ?', [f.accountId]), walletBefore, 'a free run leaves the wallet alone');

  const short = await addRun(em, f);
  const refused = await funded(short, '0.050001');
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
  assert.equal(await fund(em, f.runId, '0'), { ok: true, funding: 'bundle' });
  assert.equal(await runFunding(em, f.runId), { funding: 'bundle', bundle_id: bundleId, hold_usd: '0.000000' });
  const next = await addRun(em, f);
  assert.equal(await fund(em, next, '0.400000'), { ok: true, funding: 'wallet' });
  assert.equal(await runFunding(em, next), { funding: 'wallet', bundle_id: null, hold_usd: '0.400000' });
  assert.equal(await ledger(em, f.accountId), [['hold', '-0.400000', '0.600000']]);
});

t('ending runs counts each completed run on its workflow exactly once, in the one statement that ends it', async ({ orm }) => {
  const em = orm.em.fork() as unknown as Em;
  const f = await fixture(em, '1.000000');
  const runsCount = async () =>
    Number((await em.execute<{ runs_count: number }[]>(`select ${RUNS_COUNT_SQL} as runs_count from workflows w where id = ?`, [f.workflowId]))[0]!.runs_count);
  let sql: string[] = [];
  const ended = (id: string, owed: string | null) =>
    end(em, id, owed, async (fn) => {
      sql = (await statementsWhile(orm, fn)).sql.filter((q) => !/^(begin|commit)/i.test(q));
    });
  const held = await addRun(em, f);
  await fund(em, held, '0.250200');
  await addBundle(em, f, 2);
  const refunded = await addRun(em, f);
  await fund(em, f.runId, '0.250000');
  await fund(em, refunded, '0.250000');

  await ended(f.runId, '0.200000');
  assert.equal([sql.length, await runsCount()], [1, 1]);
  await ended(refunded, null);
  assert.equal([sql.length, await runsCount()], [1, 1], 'a cancelled run is not counted');

  await ended(held, '1.250357');
  assert.is(await runsCount(), 2);
  assert.equal(await wallet(em, f.accountId), { balance_usd: '0.000000', held_usd: '0.000000' });
  assert.equal(await ledger(em, f.accountId), [
    ['hold', '-0.250200', '0.749800'],
    ['release', '0.250200', '1.000000'],
    ['charge', '-1.000000', '0.000000'],
    ['unpaid', '0.250357', '0.000000'],
  ]);

  const free = await addRun(em, f);
  await fund(em, free, '0');
  await ended(free, '0');
  assert.is(await runsCount(), 3);
  assert.is((await ledger(em, f.accountId)).length, 4, 'a run that owes nothing writes no ledger row');
});

t.run();
