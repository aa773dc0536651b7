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
import { resetDb, testOrm, insertWorkflow } from '../helpers/db.ts';
import { replaceFunctions } from '../helpers/sql-functions.ts';
import { testRunsDeps } from '../helpers/runs-deps.ts';

/**
 * The wallet rule is defined once, by the SQL functions `wr_wallet_holds` and `wr_wallet_paid`
 * (src/db/entities/routines.ts, docs/design/money.md). This suite replaces them with another rule (a
 * wallet may go 1 USD below zero, and pays every charge in full) and moves money down every path:
 * funding at preparation, a run ended after it, and a run funded and ended at once. Each must follow
 * the new rule; the original functions are put back afterwards.
 */

const t = suite<{ orm: Orm; deps: RunsDeps; restore: () => Promise<void> }>('the wallet rule, defined once');

const OVERDRAFT = [
  `create or replace function wr_wallet_holds(balance numeric, hold numeric) returns boolean immutable language sql as $$ select balance + 1 >= hold $$`,
  `create or replace function wr_wallet_paid(balance numeric, charge numeric) returns numeric immutable language sql as $$ select charge $$`,
];

t.before(async (ctx) => {
  ctx.orm = await testOrm();
  ctx.deps = testRunsDeps(ctx.orm);
  ctx.restore = await replaceFunctions(ctx.orm, ['wr_wallet_holds', 'wr_wallet_paid'], OVERDRAFT);
});
t.after(async ({ restore }) => restore());
t.before.each(async ({ orm }) => resetDb(orm));

/** An account with a wallet of `balance`, a workflow, and an admitted run whose displayed and creator price is `price`. */
async function admitted(orm: Orm, balance: string, price: string): Promise<{ runId: string; accountId: string }> {
  const em = orm.em.fork();
  const [accountId, workflowId, versionId, runId] = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
  await em.execute('insert into accounts (id, handle) values (?, ?)', [accountId, `a${accountId.slice(0, 8)}`]);
  await em.execute('insert into wallets (account_id, balance_usd) values (?, ?)', [accountId, balance]);
  await insertWorkflow(em, { id: workflowId, ownerId: accountId, versionId, runModel: 'per_run' });
  await em.execute(
    `insert into runs (id, account_id, workflow_id, version_id, status, phase, user_access, displayed_price_usd, creator_price_usd, step_usd,
                       compute_limit_usd, credential_mode, inputs, progress, last_sequence)
     values (?, ?, ?, ?, 'pending', 'starting', 'wallet', ?, ?, 0.0001, 5, 'service_hosted', '{}', '{"results":{},"timers":{}}', 0)`,
    [runId, accountId, workflowId, versionId, price, price],
  );
  await runMeta(em as never, runId);
  return { runId, accountId };
}

async function money(orm: Orm, r: { runId: string; accountId: string }) {
  const em = orm.em.fork();
  const [wallet] = await em.execute<{ balance_usd: string; held_usd: string }[]>('select balance_usd::text, held_usd::text from wallets where account_id = ?', [
    r.accountId,
  ]);
  const ledger = await em.execute<{ kind: string; amount_usd: string }[]>('select kind, amount_usd::text from ledger_entries where run_id = ? order by id', [
    r.runId,
  ]);
  return { wallet: [wallet!.balance_usd, wallet!.held_usd], ledger: ledger.map((l) => `${l.kind} ${l.amount_usd}`) };
}

const COMPLETED: Finished = { status: 'completed', outcome: 'completed', reason: null, outputs: [] };

t('funding at preparation holds beyond the balance, and the run ended later is charged in full below zero', async ({ orm }) => {
  const r = await admitted(orm, '0.500000', '1.200000');
  const em = orm.em.fork() as unknown as Em;
  assert.equal(await em.transactional((tx) => fundRun(tx as Em, r.runId)), { ok: true, funding: 'wallet' });
  assert.equal(await money(orm, r), { wallet: ['-0.700000', '1.200000'], ledger: ['hold -1.200000'] });
  await em.transactional((tx) => finishRun(tx as Em, r.runId, { status: 'completed', outcome: 'completed', charge: 'full' }));
  assert.equal(await money(orm, r), { wallet: ['-0.700000', '0.000000'], ledger: ['hold -1.200000', 'release 1.200000', 'charge -1.200000'] });
});

t('a run funded and ended at once follows the same rule: written past the old balance, charged in full', async ({ orm, deps }) => {
  const r = await admitted(orm, '0.100000', '0.800000');
  const done = await completeRun(deps, r.runId, COMPLETED, [], undefined, { start: true });
  assert.ok(done.completed, 'the old rule would not have covered the hold');
  assert.equal(await money(orm, r), { wallet: ['-0.700000', '0.000000'], ledger: ['hold -0.800000', 'release 0.800000', 'charge -0.800000'] });
});

t('beyond the new overdraft a hold is still refused, on both paths', async ({ orm, deps }) => {
  const prepared = await admitted(orm, '0.100000', '1.200000');
  assert.is((await orm.em.fork().transactional((tx) => fundRun(tx as unknown as Em, prepared.runId))).ok, false);
  const inMemory = await admitted(orm, '0.100000', '1.200000');
  assert.is((await completeRun(deps, inMemory.runId, COMPLETED, [], undefined, { start: true })).completed, false);
  assert.equal(
    [await money(orm, prepared), await money(orm, inMemory)],
    [
      { wallet: ['0.100000', '0.000000'], ledger: [] },
      { wallet: ['0.100000', '0.000000'], ledger: [] },
    ],
  );
});

t.run();
