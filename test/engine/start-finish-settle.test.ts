import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { testOrm } from '../helpers/db.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { renewLeases } from '../../src/runs/leases.ts';
import { statementsWhile } from '../helpers/statement-log.ts';
import { ACCEPT_RUNS } from '../../src/sql/accept-runs.ts';
import { FINISH_RUNS } from '../../src/sql/finish-runs.ts';

/**
 * An in-memory run is executed, after its admission, in ONE statement (src/sql/finish-runs.ts
 * FINISH_RUNS), whether or not its account has a webhook endpoint for its terminal event (then
 * the same statement writes the outbox). Money, ledger and tallies are the same either way.
 */

const orm = await testOrm();
const dir = mkdtempSync(join(tmpdir(), 'wr-sfs-'));
const WF = 'aaaaaaaa-5f5f-4000-8000-000000000001';
const text = (id: string, template: string) => ({ id, kind: 'text.template', template });
const key = (secret: string) => ({ secret, scopes: ['run:execute', 'run:read'] });
const hook = (events?: string[]) => [{ url: 'https://127.0.0.1:9/hook', secret: 'whsec_c2V0dGxlbWVudC1mYXVsdC10ZXN0LTE=', ...(events ? { events } : {}) }];
const CATALOG = {
  pricing: { stepUsd: '0.000100' },
  accounts: [
    { handle: 'alice', walletUsd: '10.000000' },
    { handle: 'bob', walletUsd: '10.000000', apiKeys: [key('wr_sfs_bob')] },
    { handle: 'carl', walletUsd: '10.000000', apiKeys: [key('wr_sfs_carl')], webhooks: hook() },
    { handle: 'dora', walletUsd: '0.100000', apiKeys: [key('wr_sfs_dora')] },
    { handle: 'bea', walletUsd: '10.000000', apiKeys: [key('wr_sfs_bea')] },
    { handle: 'eve', walletUsd: '10.000000', apiKeys: [key('wr_sfs_eve')], webhooks: hook(['run.failed']) },
  ],
  workflows: [
    {
      id: WF,
      owner: 'alice',
      name: 'Three templates',
      runModel: 'per_run',
      priceUsd: '0.250000',
      versions: [
        {
          label: 'v1',
          graph: {
            nodes: [
              { id: 'name', kind: 'input.text', required: true },
              text('t1', 'Hello {{name}}.'),
              text('t2', '{{t1}} {{t1}}'),
              text('t3', '{{t2}} again'),
              { id: 'result', kind: 'output', from: 't3', name: 'Result', type: 'text' },
            ],
          },
        },
      ],
    },
  ],
  bundles: [{ account: 'bea', workflow: WF, version: 'v1', runs: 2, usdPerRun: '0.020000' }],
};
const catalogFile = join(dir, 'catalog.json');
writeFileSync(catalogFile, JSON.stringify(CATALOG));

const t = suite<{ app: TestApp }>('an in-memory run in one statement');
t.before(async (ctx) => {
  ctx.app = await startTestApp({ catalog: catalogFile, engine: 'app' });
});
t.after(async ({ app }) => {
  await app.close();
  rmSync(dir, { recursive: true, force: true });
});

const q = <T = Record<string, unknown>>(sql: string, params: unknown[] = []) => orm.em.fork().execute<T[]>(sql, params);

/** Starts a run as `who` and waits for its end; the statements the ORM sent with the run's id among their parameters. */
async function run(app: TestApp, who: string): Promise<{ id: string; sql: string[] }> {
  let id: string | null = null;
  const { sql } = await statementsWhile(
    orm,
    async () => {
      const res = await app.call('POST', '/runs', { key: `wr_sfs_${who}`, body: { workflow: WF, inputs: { name: 'Ada' } } });
      assert.is(res.status, 202, res.text);
      id = String(res.body.run.id);
      await waitFor(`run ${id} to end`, async () => {
        const [r] = await q<{ status: string }>('select status from runs where id = ?', [id]);
        return ['completed', 'failed', 'cancelled'].includes(r!.status) || null;
      });
    },
    (s) => !!id && (s.params ?? []).some((p) => p === id || (Array.isArray(p) && p.includes(id)) || (typeof p === 'string' && p.includes(id!))),
  );
  return { id: id!, sql };
}

/** The named statements among `sql` after the acceptance (src/sql names as the texts start; the test's own polls left out). */
const named = (sql: string[]) =>
  sql
    .filter((s) => !s.startsWith('select status from runs') && s !== ACCEPT_RUNS.text)
    .map((s) => {
      if (s === FINISH_RUNS.text) return 'finish_runs';
      return s.slice(0, 60);
    });

/** What a run left: its row's money and state, its events, its ledger rows, its outbox rows, its account's wallet. */
async function outcome(id: string) {
  const [r] = await q(
    `select status, outcome, reason, phase, billing_status, charge_usd::text, cap_usd::text, funding, hold_usd::text, compute_usd::text,
            steps_executed, bundle_id is not null as bundled, account_id from runs where id = ?`,
    [id],
  );
  const events = (await q<{ type: string }>('select type from run_events where run_id = ? order by sequence', [id])).map((e) => e.type);
  const ledger = (
    await q<Record<string, string>>('select kind, amount_usd::text, balance_after_usd::text, note from ledger_entries where run_id = ? order by id', [id])
  ).map((l) => [l.kind, l.amount_usd, l.balance_after_usd, l.note]);
  const outbox = (await q<{ event_type: string }>('select event_type from webhook_deliveries where run_id = ?', [id])).map((o) => o.event_type);
  const [w] = await q('select balance_usd::text, held_usd::text from wallets where account_id = ?', [r!.account_id]);
  const run: Record<string, unknown> = { ...r!, steps_executed: Number(r!.steps_executed) };
  delete run.account_id;
  return { run, events, ledger, outbox, wallet: w };
}

const tally = async () =>
  Number((await q<{ n: string }>('select coalesce(sum(runs), 0)::int as n from workflow_run_tallies where workflow_id = ?', [WF]))[0]!.n);

const COMPLETED = {
  status: 'completed',
  outcome: 'completed',
  reason: null,
  phase: null,
  billing_status: 'settled',
  charge_usd: '0.250300',
  cap_usd: '0.250300',
  funding: 'wallet',
  hold_usd: '0.250300',
  compute_usd: '0.000300',
  steps_executed: 3,
  bundled: false,
};
const LEDGER = [
  ['hold', '-0.250300', '9.749700', 'hold for run'],
  ['release', '0.250300', '10.000000', 'hold released at settlement'],
  ['charge', '-0.250300', '9.749700', 'run charge'],
];

t(
  'a run is executed in ONE statement after its admission, with or without a webhook endpoint: the same money, ledger and tally, and the outbox row',
  async ({ app }) => {
    const before = await tally();
    const bob = await run(app, 'bob');
    assert.equal(named(bob.sql), ['finish_runs']);
    const alone = await outcome(bob.id);
    assert.equal(alone.run, COMPLETED);
    assert.equal(alone.ledger, LEDGER);
    assert.equal(alone.wallet, { balance_usd: '9.749700', held_usd: '0.000000' });
    assert.equal(alone.outbox, []);
    assert.is(await tally(), before + 1);

    // The same run for an account with an endpoint: the one statement writes its outbox row too.
    const carl = await run(app, 'carl');
    assert.equal(named(carl.sql), ['finish_runs']);
    const hooked = await outcome(carl.id);
    assert.equal(hooked.outbox, ['run.completed']);
    assert.equal({ ...hooked, outbox: [] }, alone, 'the same money, ledger rows, balances, events and run columns either way');
    assert.equal([alone.events.slice(0, 3), alone.events.at(-1)], [['run.queued', 'run.preparing', 'run.started'], 'run.completed']);
    assert.is(await tally(), before + 2);
  },
);

t("an endpoint that does not take the run's terminal event gets no outbox row", async ({ app }) => {
  const eve = await run(app, 'eve');
  assert.equal(named(eve.sql), ['finish_runs']);
  const r = await outcome(eve.id);
  assert.equal([r.run, r.outbox], [COMPLETED, []]);
});

t('a wallet that cannot cover the hold at settlement writes nothing there and leaves the run to preparation, which fails it unpaid', async ({ app }) => {
  const before = await tally();
  const dora = await run(app, 'dora');
  assert.equal(named(dora.sql).slice(0, 1), ['finish_runs']);
  const r = await outcome(dora.id);
  assert.equal([r.run.status, r.run.billing_status, r.run.charge_usd, r.run.funding], ['failed', 'not_charged', null, null]);
  assert.match(String(r.run.reason), /insufficient funds/);
  assert.equal(r.events, ['run.queued', 'run.preparing', 'run.failed'], 'nothing of the refused statement remains');
  assert.equal([r.ledger, r.wallet], [[], { balance_usd: '0.100000', held_usd: '0.000000' }]);
  assert.is(await tally(), before);
});

t('a bundle-funded run is executed in one statement too: the bundle pays its price per run and the wallet is not touched', async ({ app }) => {
  const before = await tally();
  const bea = await run(app, 'bea');
  assert.equal(named(bea.sql), ['finish_runs']);
  const r = await outcome(bea.id);
  assert.equal(r.run, { ...COMPLETED, charge_usd: '0.020000', cap_usd: '0.020000', funding: 'bundle', hold_usd: '0.000000', bundled: true });
  assert.equal([r.ledger, r.wallet], [[], { balance_usd: '10.000000', held_usd: '0.000000' }]);
  const [b] = await q<{ runs_left: number }>(`select runs_left from bundles b join accounts a on a.id = b.account_id where a.handle = 'bea'`);
  assert.is(Number(b!.runs_left), 1);
  assert.is(await tally(), before + 1);
});

if (process.env.DATABASE_URL) {
  t('runs of one account ready at the same time are committed in batches, each with its own ledger rows in sequence', async ({ app }) => {
    const [w0] = await q<{ balance_usd: string }>(`select w.balance_usd::text from wallets w join accounts a on a.id = w.account_id where a.handle = 'bob'`);
    const posted = await Promise.all(
      Array.from({ length: 16 }, () => app.call('POST', '/runs', { key: 'wr_sfs_bob', body: { workflow: WF, inputs: { name: 'Ada' } } })),
    );
    const ids = posted.map((r) => String(r.body.run.id));
    await waitFor('the 16 runs to end', async () => {
      const [n] = await q<{ n: number }>(`select count(*)::int as n from runs where id in (?) and status = 'completed'`, [ids]);
      return Number(n!.n) === 16 || null;
    });
    const [tx] = await q<{ n: number }>('select count(distinct xmin::text)::int as n from ledger_entries where run_id in (?)', [ids]);
    assert.ok(Number(tx!.n) < 16, `16 runs settled in ${tx!.n} transactions: some were committed together`);
    const charges = await q<{ balance_after_usd: string }>(
      `select balance_after_usd::text from ledger_entries where run_id in (?) and kind = 'charge' order by id`,
      [ids],
    );
    const start = Number(w0!.balance_usd) * 1e6;
    assert.equal(
      charges.map((c) => Math.round(Number(c.balance_after_usd) * 1e6)),
      Array.from({ length: 16 }, (_, i) => start - (i + 1) * 250300),
      'each charge taken from the balance the one before it left',
    );
    const [w] = await q<{ balance_usd: string; held_usd: string }>(
      `select w.balance_usd::text, w.held_usd::text from wallets w join accounts a on a.id = w.account_id where a.handle = 'bob'`,
    );
    assert.equal([Math.round(Number(w!.balance_usd) * 1e6), w!.held_usd], [start - 16 * 250300, '0.000000']);
  });
  t('a lease renewal skips a run row being written instead of waiting for it (no deadlock with a group), and still reports it held', async ({ app }) => {
    const [a, b] = await Promise.all([run(app, 'bob'), run(app, 'bob')]);
    await q(`update runs set lease_owner = 'renewal-test', lease_until = now() where id in (?)`, [[a.id, b.id]]);
    const writer = orm.em.fork();
    await writer.transactional(async (tx) => {
      await tx.execute('select id from runs where id = ? for update', [a.id]);
      const started = Date.now();
      const held = await renewLeases(app.deps, { owner: 'renewal-test', ttlMs: 60_000 }, [a.id, b.id]);
      assert.ok(Date.now() - started < 900, 'answered without waiting for the locked row');
      assert.equal([...held].sort(), [a.id, b.id].sort(), 'both still held');
    });
    const rows = await q<{ id: string; later: boolean }>(`select id, lease_until > now() + interval '30 seconds' as later from runs where id in (?)`, [
      [a.id, b.id],
    ]);
    const later = Object.fromEntries(rows.map((r) => [r.id, r.later]));
    assert.equal([later[a.id], later[b.id]], [false, true], 'only the free row was renewed');
  });
}

t.run();
