import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { Orm } from '../../src/db/orm.ts';
import { query } from '../../src/db/statement.ts';
import { usd } from '../../src/domain/money.ts';
import { runEnding } from '../../src/runs/finish-run.ts';
import { FINISH_RUNS, finishRunsValues, type RunEnding } from '../../src/sql/finish-runs.ts';
import { FUND_RUNS, fundRunsValues } from '../../src/sql/fund-runs.ts';
import { resetDb, testOrm, insertWorkflow } from '../helpers/db.ts';

/**
 * The money of runs is the same whatever path and batching end them. FINISH_RUNS with many runs computed
 * in memory in one execution against the same calls each alone (a batch of one), one after another in
 * the same order: twin worlds (accounts with or without a wallet, bundles, endpoints, tallies, admitted
 * runs with fences that hold or not) must end with the same rows, and every call with the same answer.
 * Bundle picks, the wallet's balance run after run, holds the balance left by the runs before does not
 * cover (refused, as a row) and charges it does not (unpaid) are the cases. And the same runs funded at
 * preparation (FUND_RUNS) and ended later (FINISH_RUNS, as the engines, cancellation and the timeouts
 * end them) leave the same balances, ledger, bundles and tallies as runs funded and ended at once.
 */

const t = suite<{ orm: Orm }>('runs finished in one execution, as one by one');
t.before(async (ctx) => {
  ctx.orm = await testOrm();
});
t.before.each(async ({ orm }) => resetDb(orm));

const MONEY = ['0', '0.000100', '0.100000', '0.250300', '1.000000'];
const FINISHES = [
  ['completed', 'completed', null],
  ['completed', 'completed_with_issues', null],
  ['failed', null, 'a node failed'],
  ['cancelled', null, null],
] as const;

interface AccountSpec {
  /** Its wallet's balance, or null: no wallet row. */
  wallet: string | null;
  held: string;
  hooked: 'all' | 'failed' | null;
  /** -1: a bundle with no runs left. */
  bundleRuns: number;
  tallied: boolean;
}
interface RunSpec {
  account: number;
  /** Its account's first workflow (which may have a bundle) or second. */
  workflow: number;
  displayed: string;
  creator: string;
  finish: number;
  charge: 'full' | 'compute' | 'none';
  steps: number;
  extra: string;
  results: boolean;
  /** A fence that does not hold: a result or a started timer the write says must be absent. */
  fenced: 'result' | 'timer' | null;
  queued: boolean;
  secrets: boolean;
  /** A tight compute limit fails the fence on its steps' compute. */
  limit: string;
}

const accountSpec = fc.record<AccountSpec>({
  wallet: fc.constantFrom('0', '0.200000', '0.300000', '1.000000', '50.000000', null),
  held: fc.constantFrom('0', '0.500000'),
  hooked: fc.constantFrom(null, null, 'all', 'failed'),
  bundleRuns: fc.constantFrom(0, 0, 0, 1, 2, -1),
  tallied: fc.boolean(),
});
const runSpec = (accounts: number) =>
  fc.record<RunSpec>({
    account: fc.integer({ min: 0, max: accounts - 1 }),
    workflow: fc.integer({ min: 0, max: 1 }),
    displayed: fc.constantFrom(...MONEY),
    creator: fc.constantFrom(...MONEY),
    finish: fc.integer({ min: 0, max: FINISHES.length - 1 }),
    charge: fc.constantFrom('full', 'compute', 'none'),
    steps: fc.integer({ min: 0, max: 3 }),
    extra: fc.constantFrom('0', '0.000100', '0.010000', '0.0000015'),
    results: fc.boolean(),
    fenced: fc.constantFrom(null, null, null, null, null, null, 'result', 'timer'),
    queued: fc.integer({ min: 0, max: 14 }).map((n) => n === 0),
    secrets: fc.integer({ min: 0, max: 3 }).map((n) => n === 0),
    limit: fc.constantFrom('5', '5', '5', '0.000150'),
  });
const world = fc
  .array(accountSpec, { minLength: 1, maxLength: 3 })
  .chain((accounts) => fc.record({ accounts: fc.constant(accounts), runs: fc.array(runSpec(accounts.length), { minLength: 2, maxLength: 8 }) }));

interface Built {
  accounts: string[];
  workflows: string[];
  runs: string[];
}

async function build(orm: Orm, spec: { accounts: AccountSpec[]; runs: RunSpec[] }): Promise<Built> {
  const em = orm.em.fork();
  const b: Built = { accounts: [], workflows: [], runs: [] };
  const versions: string[] = [];
  for (const a of spec.accounts) {
    const accountId = randomUUID();
    await em.execute('insert into accounts (id, handle) values (?, ?)', [accountId, `a${accountId.slice(0, 8)}`]);
    if (a.wallet !== null) await em.execute('insert into wallets (account_id, balance_usd, held_usd) values (?, ?, ?)', [accountId, a.wallet, a.held]);
    for (const bundled of [true, false]) {
      const [workflowId, versionId] = [randomUUID(), randomUUID()];
      await insertWorkflow(em, { id: workflowId, ownerId: accountId, versionId, runModel: 'per_run' });
      if (bundled && a.bundleRuns !== 0) {
        await em.execute(`insert into bundles (id, account_id, workflow_id, version_id, runs_total, runs_left, usd_per_run) values (?, ?, ?, ?, 2, ?, 0.02)`, [
          randomUUID(),
          accountId,
          workflowId,
          versionId,
          Math.max(0, a.bundleRuns),
        ]);
      }
      if (a.tallied) await em.execute(`insert into workflow_run_tallies (workflow_id, shard, runs) select ?, s, 3 from generate_series(0, 15) s`, [workflowId]);
      b.workflows.push(workflowId);
      versions.push(versionId);
    }
    if (a.hooked) {
      await em.execute(`insert into webhook_endpoints (id, account_id, url, secret_ciphertext, events) values (?, ?, 'https://127.0.0.1:9/h', 'x', ?)`, [
        randomUUID(),
        accountId,
        a.hooked === 'all' ? null : '["run.failed"]',
      ]);
    }
    b.accounts.push(accountId);
  }
  for (const r of spec.runs) {
    const runId = randomUUID();
    const progress =
      r.fenced === 'result'
        ? '{"results":{"t1":{"status":"completed","value":"x"}},"timers":{}}'
        : r.fenced === 'timer'
          ? '{"results":{},"timers":{"d":1,"d2":2}}'
          : '{"results":{},"timers":{"d":1}}';
    const w = 2 * r.account + r.workflow;
    await em.execute(
      `insert into runs (id, account_id, workflow_id, version_id, status, phase, user_access, displayed_price_usd, creator_price_usd, step_usd,
                         compute_limit_usd, credential_mode, inputs, progress, last_sequence)
       values (?, ?, ?, ?, 'pending', ?, 'wallet', ?, ?, 0.0001, ?, 'service_hosted', '{}', ?, 1)`,
      [runId, b.accounts[r.account], b.workflows[w], versions[w], r.queued ? 'queued' : 'starting', r.displayed, r.creator, r.limit, progress],
    );
    if (r.secrets)
      await em.execute(`insert into run_secrets (id, run_id, kind, name, ciphertext) values (?, ?, 'password_input', 'password', 'x')`, [randomUUID(), runId]);
    b.runs.push(runId);
  }
  return b;
}

/** The call of run `i` of the spec: a run computed in memory, funded and ended at once. */
function call(b: Built, spec: RunSpec, i: number): RunEnding {
  const [status, outcome, reason] = FINISHES[spec.finish]!;
  const steps = spec.results ? ['t1', 't2'] : [];
  const events = [
    { type: 'run.preparing', data: { quote: `it's "${i}"\\` } },
    { type: 'run.started' },
    ...steps.map((s) => ({ type: 'node.completed', nodeId: s, data: { n: s } })),
    { type: `run.${status}` },
  ];
  const finish = { status, outcome, reason, outputs: status === 'completed' ? ([{ name: 'out', value: i }] as never) : undefined, charge: spec.charge };
  return runEnding(b.runs[i]!, finish, {
    admitted: true,
    fundNow: true,
    absentResults: steps,
    absentTimers: ['d2'],
    limitSteps: spec.steps > 0 ? spec.steps : null,
    results: spec.results ? Object.fromEntries(steps.map((s) => [s, { status: 'completed', value: `${s} of ${i}` }])) : null,
    addTimers: spec.results ? { d3: 42 } : {},
    removeTimers: spec.results ? ['d'] : [],
    steps: spec.steps,
    extra: usd(spec.extra).toFixed(),
    events,
  });
}

type Answer = Record<string, unknown> | null;

/** Each call's answer (its row without `ord`, null for none), from one execution. */
async function execute(orm: Orm, calls: RunEnding[]): Promise<Answer[]> {
  const rows = await query(orm.em.fork(), FINISH_RUNS, finishRunsValues(calls));
  return calls.map((_, k) => {
    // The run's id and its events' time differ between worlds.
    const found = rows.filter((r) => Number(r.ord) === k + 1).map(({ ord, id, events_ts, ...own }) => own);
    assert.ok(found.length <= 1);
    return found[0] ?? null;
  });
}

async function snapshot(orm: Orm, b: Built, answers: Answer[]) {
  const em = orm.em.fork();
  const runIndex = new Map(b.runs.map((id, i) => [id, i]));
  const accountIndex = new Map(b.accounts.map((id, i) => [id, i]));
  const runs = await em.execute(
    `select id, status, outcome, reason, phase, billing_status, charge_usd::text, cap_usd::text, funding, hold_usd::text, compute_usd::text,
            bundle_id is not null as bundled, last_sequence, steps_executed, progress::text, outputs::text, started_at is not null as started
       from runs where id in (?) order by id`,
    [b.runs],
  );
  const events = await em.execute(`select run_id, sequence, type, node_id, data::text from run_events where run_id in (?) order by run_id, sequence`, [b.runs]);
  const ledger = await em.execute(
    `select account_id, run_id, kind, amount_usd::text, balance_after_usd::text, note from ledger_entries where account_id in (?) order by id`,
    [b.accounts],
  );
  const wallets = await em.execute(`select account_id, balance_usd::text, held_usd::text from wallets where account_id in (?)`, [b.accounts]);
  const bundles = await em.execute(`select account_id, runs_left from bundles where account_id in (?)`, [b.accounts]);
  const tallies = await em.execute(`select workflow_id, sum(runs)::int as n from workflow_run_tallies where workflow_id in (?) group by workflow_id`, [
    b.workflows,
  ]);
  const secrets = await em.execute(`select run_id from run_secrets where run_id in (?)`, [b.runs]);
  const outbox = await em.execute(`select run_id, event_type from webhook_deliveries where run_id in (?)`, [b.runs]);
  const byRun = <T extends Record<string, unknown>>(xs: T[]) => xs.map(({ id, run_id, ...rest }) => ({ run: runIndex.get(String(id ?? run_id)), ...rest }));
  const byAccount = <T extends Record<string, unknown>>(xs: T[]) =>
    xs.map(({ account_id, ...rest }) => ({ account: accountIndex.get(String(account_id)), ...rest }));
  const sorted = <T extends { run?: number; account?: number }>(xs: T[]) => xs.sort((x, y) => (x.run ?? x.account!) - (y.run ?? y.account!));
  return {
    answers: answers.map((a): Answer => a && { ...a, account_id: accountIndex.get(String(a.account_id)) }),
    runs: sorted(byRun(runs)),
    events: byRun(events).sort((x, y) => x.run! - y.run! || Number(x.sequence) - Number(y.sequence)),
    ledger: byRun(byAccount(ledger)),
    wallets: sorted(byAccount(wallets)),
    bundles: sorted(byAccount(bundles)),
    tallies: tallies.map((r) => [b.workflows.indexOf(String(r.workflow_id)), Number(r.n)]).sort((x, y) => x[0]! - y[0]!),
    secrets: secrets.map((r) => runIndex.get(String(r.run_id))).sort(),
    outbox: sorted(byRun(outbox)),
  };
}

t('calls in one execution leave the rows and answers of the same calls one by one', async ({ orm }) => {
  const seed = Number(process.env.FC_SEED ?? Date.now() % 2 ** 31);
  const seen = { refused: 0, unpaid: 0, bundled: 0, several: 0 };
  await fc.assert(
    fc.asyncProperty(world, async (spec) => {
      await resetDb(orm);
      const together = await build(orm, spec);
      const answers = await execute(
        orm,
        spec.runs.map((r, i) => call(together, r, i)),
      );
      const alone = await build(orm, spec);
      const oneByOne: Answer[] = [];
      for (const [i, r] of spec.runs.entries()) oneByOne.push((await execute(orm, [call(alone, r, i)]))[0]!);
      const [x, y] = [await snapshot(orm, alone, oneByOne), await snapshot(orm, together, answers)];
      assert.equal(y, x);
      if (x.answers.some((a) => a !== null && a.written === false)) seen.refused++;
      if (x.ledger.some((l) => l.kind === 'unpaid')) seen.unpaid++;
      if (x.runs.some((r) => r.bundled)) seen.bundled++;
      if (new Set(x.runs.filter((r) => r.started).map((r) => spec.runs[r.run!]!.account)).size < x.runs.filter((r) => r.started).length) seen.several++;
    }),
    { numRuns: 100, seed },
  );
  const counts = `${JSON.stringify(seen)} (FC_SEED=${seed})`;
  assert.ok(
    Object.values(seen).every((n) => n >= 1),
    counts,
  );
});

t(
  'an account whose balance covers the first run only: the second is answered as refused and not written; charges beyond the balance are unpaid',
  async ({ orm }) => {
    const run = (displayed: string, creator: string): RunSpec => ({
      account: 0,
      workflow: 1,
      displayed,
      creator,
      finish: 0,
      charge: 'full',
      steps: 0,
      extra: '0',
      results: false,
      fenced: null,
      queued: false,
      secrets: false,
      limit: '5',
    });
    const spec = {
      accounts: [{ wallet: '0.300000', held: '0', hooked: null, bundleRuns: 0, tallied: false }],
      runs: [run('0.100000', '0.200000'), run('0.150000', '0.200000'), run('0.050000', '0.200000')],
    };
    const b = await build(orm, spec);
    const answers = await execute(
      orm,
      spec.runs.map((r, i) => call(b, r, i)),
    );
    assert.equal(
      answers.map((a) => a?.written),
      [true, false, true],
    );
    const ledger = await orm.em
      .fork()
      .execute<{ kind: string; amount_usd: string }[]>(
        `select kind, amount_usd::text from ledger_entries where account_id = ? and kind in ('charge', 'unpaid') order by id`,
        [b.accounts[0]],
      );
    assert.equal(
      ledger.map((l) => [l.kind, l.amount_usd]),
      [
        ['charge', '-0.200000'],
        ['charge', '-0.100000'],
        ['unpaid', '0.100000'],
      ],
    );
    const [second] = await orm.em
      .fork()
      .execute<{ status: string; last_sequence: number }[]>('select status, last_sequence from runs where id = ?', [b.runs[1]]);
    assert.equal([second!.status, Number(second!.last_sequence)], ['pending', 1]);
  },
);

/** What the runs' money left: balances, ledger, bundles, tallies, the runs' billing and funding, the outbox. */
function moneyOf(x: Awaited<ReturnType<typeof snapshot>>) {
  const runs = x.runs.map((r) => [r.run, r.billing_status, r.charge_usd, r.cap_usd, r.funding, r.hold_usd, r.compute_usd, r.bundled, r.status]);
  return { runs, ledger: x.ledger, wallets: x.wallets, bundles: x.bundles, tallies: x.tallies, outbox: x.outbox };
}

t('runs funded at preparation and ended later leave the money of runs funded and ended at once', async ({ orm }) => {
  const seed = Number(process.env.FC_SEED ?? Date.now() % 2 ** 31);
  const seen = { refused: 0, unpaid: 0, bundled: 0, givenBack: 0 };
  // Fences that hold: a run's steps are written while it runs, after its funding.
  const holding = world.map((w) => ({ ...w, runs: w.runs.map((r) => ({ ...r, fenced: null, queued: false, limit: '5' })) }));
  await fc.assert(
    fc.asyncProperty(holding, async (spec) => {
      await resetDb(orm);
      const atOnce = await build(orm, spec);
      const answers: Answer[] = [];
      for (const [i, r] of spec.runs.entries()) answers.push((await execute(orm, [call(atOnce, r, i)]))[0]!);
      const later = await build(orm, spec);
      for (const [i, r] of spec.runs.entries()) {
        const [funded] = await query(orm.em.fork(), FUND_RUNS, fundRunsValues([later.runs[i]!]));
        if (funded?.funding === null) continue;
        await execute(orm, [{ ...call(later, r, i), admitted: false, fundNow: false }]);
      }
      const [x, y] = [moneyOf(await snapshot(orm, atOnce, answers)), moneyOf(await snapshot(orm, later, []))];
      assert.equal(y, x);
      if (answers.some((a) => a !== null && a.written === false)) seen.refused++;
      if (x.ledger.some((l) => l.kind === 'unpaid')) seen.unpaid++;
      if (x.runs.some((r) => r[7])) seen.bundled++;
      if (spec.runs.some((r) => r.charge === 'none' || FINISHES[r.finish]![0] === 'cancelled') && x.runs.some((r) => r[4] === 'bundle')) seen.givenBack++;
    }),
    { numRuns: 40, seed },
  );
  assert.ok(
    Object.values(seen).every((n) => n >= 1),
    `${JSON.stringify(seen)} (FC_SEED=${seed})`,
  );
});

t.run();
