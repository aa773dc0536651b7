import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { Orm } from '../../src/db/orm.ts';
import { inOneMessage } from '../../src/db/group-commit.ts';
import { query } from '../../src/db/statement.ts';
import { SETTLEMENTS_TOGETHER } from '../../src/runs/settlements-together.ts';
import { START_FINISH_AND_SETTLE } from '../../src/sql/start-and-finish.ts';
import { resetDb, testOrm } from '../helpers/db.ts';

/**
 * A group of one-statement settlements as ONE statement (START_FINISH_AND_SETTLE_MANY, through
 * SETTLEMENTS_TOGETHER) against the same settlements one by one, each its own transaction, in the same
 * order: twin worlds (accounts, wallets, bundles, endpoints, admitted runs) must end with the same rows
 * and every run with the same answer. When the one statement raises, the group runs again statement by
 * statement (src/db/group-commit.ts): it may only do so when one by one some run is refused or left
 * owing (an `unpaid` ledger row), the cases it leaves to the single statement.
 */

const t = suite<{ orm: Orm }>('a group of settlements as one statement');
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
  /** An endpoint: for every terminal event (`all`), for failed runs only, or none. */
  hooked: 'all' | 'failed' | null;
  bundleRuns: number;
  /** Completed runs of its workflow counted before, on every shard of the tally. */
  tallied: boolean;
}
interface RunSpec {
  account: number;
  /** Its account's first workflow (0, which may have a bundle) or second (1). */
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
  /** Sealed inputs, deleted with the run's settlement. */
  secrets: boolean;
  /** The write carries no events at all (the engine always sends some; the statement must still agree). */
  silent: boolean;
  /** The timers that must be absent are not given (null): the fence does not hold. */
  unknownTimers: boolean;
  /** The run's compute limit: a tight one fails the fence on its steps' compute. */
  limit: string;
}

const accountSpec = fc.record<AccountSpec>({
  wallet: fc.constantFrom('0', '0.200000', '1.000000', '5.000000', '50.000000', '50.000000', null),
  held: fc.constantFrom('0', '0.500000'),
  hooked: fc.constantFrom(null, null, null, null, 'all', 'failed'),
  // -1: a bundle with no runs left.
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
    fenced: fc.constantFrom(null, null, null, null, null, null, null, null, 'result', 'timer'),
    queued: fc.integer({ min: 0, max: 14 }).map((n) => n === 0),
    secrets: fc.integer({ min: 0, max: 3 }).map((n) => n === 0),
    silent: fc.integer({ min: 0, max: 7 }).map((n) => n === 0),
    unknownTimers: fc.integer({ min: 0, max: 9 }).map((n) => n === 0),
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

/** The world's rows; its runs' ids, in the spec's order. */
async function build(orm: Orm, spec: { accounts: AccountSpec[]; runs: RunSpec[] }): Promise<Built> {
  const em = orm.em.fork();
  const b: Built = { accounts: [], workflows: [], runs: [] };
  const versions: string[] = [];
  for (const a of spec.accounts) {
    const accountId = randomUUID();
    await em.execute('insert into accounts (id, handle) values (?, ?)', [accountId, `a${accountId.slice(0, 8)}`]);
    if (a.wallet !== null) await em.execute('insert into wallets (account_id, balance_usd, held_usd) values (?, ?, ?)', [accountId, a.wallet, a.held]);
    // Two workflows per account: the first may have a bundle, the second never has.
    for (const bundled of [true, false]) {
      const [workflowId, versionId] = [randomUUID(), randomUUID()];
      await em.execute(`insert into workflows (id, owner_id, name, run_model, listing, credential_mode) values (?, ?, 'w', 'per_run', 'public', 'service_hosted')`, [workflowId, accountId]);
      await em.execute(`insert into workflow_versions (id, workflow_id, label, graph, graph_hash) values (?, ?, 'v1', '{"nodes":[]}', ?)`, [versionId, workflowId, 'x'.repeat(64)]);
      if (bundled && a.bundleRuns !== 0) {
        await em.execute(`insert into bundles (id, account_id, workflow_id, version_id, runs_total, runs_left, usd_per_run) values (?, ?, ?, ?, 2, ?, 0.02)`, [
          randomUUID(), accountId, workflowId, versionId, Math.max(0, a.bundleRuns),
        ]);
      }
      if (a.tallied) {
        await em.execute(`insert into workflow_run_tallies (workflow_id, shard, runs) select ?, s, 3 from generate_series(0, 15) s`, [workflowId]);
      }
      b.workflows.push(workflowId);
      versions.push(versionId);
    }
    if (a.hooked) {
      await em.execute(`insert into webhook_endpoints (id, account_id, url, secret_ciphertext, events) values (?, ?, 'https://127.0.0.1:9/h', 'x', ?)`, [
        randomUUID(), accountId, a.hooked === 'all' ? null : '["run.failed"]',
      ]);
    }
    b.accounts.push(accountId);
  }
  for (const r of spec.runs) {
    const runId = randomUUID();
    const progress =
      r.fenced === 'result' ? '{"results":{"t1":{"status":"completed","value":"x"}},"timers":{}}'
      : r.fenced === 'timer' ? '{"results":{},"timers":{"d":1,"d2":2}}'
      : '{"results":{},"timers":{"d":1}}';
    await em.execute(
      `insert into runs (id, account_id, workflow_id, version_id, status, phase, user_access, displayed_price_usd, creator_price_usd, step_usd,
                         compute_limit_usd, credential_mode, inputs, progress, last_sequence)
       values (?, ?, ?, ?, 'pending', ?, 'wallet', ?, ?, 0.0001, ?, 'service_hosted', '{}', ?, 1)`,
      [runId, b.accounts[r.account], b.workflows[2 * r.account + r.workflow], versions[2 * r.account + r.workflow], r.queued ? 'queued' : 'starting', r.displayed, r.creator, r.limit, progress],
    );
    if (r.secrets) await em.execute(`insert into run_secrets (id, run_id, kind, name, ciphertext) values (?, ?, 'password_input', 'password', 'x')`, [randomUUID(), runId]);
    b.runs.push(runId);
  }
  return b;
}

/** START_FINISH_AND_SETTLE's values for run `i` of the spec. */
function values(b: Built, spec: RunSpec, i: number): unknown[] {
  const [status, outcome, reason] = FINISHES[spec.finish]!;
  const steps = spec.results ? ['t1', 't2'] : [];
  const types = spec.silent ? [] : ['run.preparing', 'run.started', ...steps.map(() => 'node.completed'), `run.${status}`];
  const nodes = spec.silent ? [] : [null, null, ...steps, null];
  const data = types.map((type, n) => JSON.stringify({ n, type, quote: `it's "${i}"\\` }));
  return [
    b.runs[i],
    steps,
    spec.unknownTimers ? null : ['d2'],
    spec.steps > 0 ? spec.steps : null,
    spec.results ? JSON.stringify(Object.fromEntries(steps.map((s) => [s, { status: 'completed', value: `${s} of ${i}` }]))) : null,
    JSON.stringify(spec.results ? { d3: 42 } : {}),
    spec.results ? ['d'] : [],
    spec.steps,
    spec.extra,
    types,
    nodes,
    data,
    status,
    outcome,
    reason,
    status === 'completed' ? JSON.stringify([{ name: 'out', value: i }]) : null,
    spec.charge,
  ];
}

/** The spec's runs in the order a group sends them (by account), as the indices of `spec.runs`. */
const groupOrder = (runs: RunSpec[]) => runs.map((r, i) => [r.account, i] as const).sort((x, y) => x[0] - y[0]).map(([, i]) => i);

const isRefusal = (e: unknown) => (e as { code?: unknown }).code === 'WR001';

/** One run's single statement as its own transaction: its row, null for none, or 'refused'. */
async function single(orm: Orm, v: unknown[]): Promise<Record<string, unknown> | null | 'refused'> {
  try {
    const [row] = await orm.em.fork().transactional((tx) => query(tx, START_FINISH_AND_SETTLE, v));
    return row ?? null;
  } catch (e) {
    if (isRefusal(e)) return 'refused';
    throw e;
  }
}

/** What every run of the world answered and left, with ids replaced by indices. */
async function snapshot(orm: Orm, b: Built, answers: (Record<string, unknown> | null | 'refused')[]) {
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
  const wallets = await em.execute(`select account_id, balance_usd::text, held_usd::text from wallets where account_id in (?) order by account_id`, [b.accounts]);
  const bundles = await em.execute(`select account_id, runs_left from bundles where account_id in (?) order by account_id`, [b.accounts]);
  const tallies = await em.execute(`select workflow_id, sum(runs)::int as n from workflow_run_tallies where workflow_id in (?) group by workflow_id`, [b.workflows]);
  const secrets = await em.execute(`select run_id from run_secrets where run_id in (?)`, [b.runs]);
  const byRun = <T extends Record<string, unknown>>(xs: T[]) => xs.map(({ id, run_id, ...rest }) => ({ run: runIndex.get(String(id ?? run_id)), ...rest }));
  return {
    answers: answers.map((a) => (a && a !== 'refused' ? { ...a, account_id: accountIndex.get(String(a.account_id)) } : a)),
    runs: byRun(runs).sort((x, y) => x.run! - y.run!),
    events: byRun(events).sort((x, y) => x.run! - y.run! || Number(x.sequence) - Number(y.sequence)),
    ledger: ledger.map(({ account_id, run_id, ...rest }) => ({ account: accountIndex.get(String(account_id)), run: runIndex.get(String(run_id)), ...rest })),
    wallets: wallets.map(({ account_id, ...rest }) => ({ account: accountIndex.get(String(account_id)), ...rest })).sort((x, y) => x.account! - y.account!),
    bundles: bundles.map(({ account_id, ...rest }) => ({ account: accountIndex.get(String(account_id)), ...rest })).sort((x, y) => x.account! - y.account!),
    tallies: tallies.map((r) => [b.workflows.indexOf(String(r.workflow_id)), Number(r.n)]).sort((x, y) => x[0]! - y[0]!),
    secrets: secrets.map((r) => runIndex.get(String(r.run_id))).sort(),
  };
}

t('the one statement leaves the rows and answers of the statements one by one, or leaves the group to them', async ({ orm }) => {
  const seed = Number(process.env.FC_SEED ?? Date.now() % 2 ** 31);
  let together = 0;
  let fellBack = 0;
  let leftAlone = 0;
  await fc.assert(
    fc.asyncProperty(world, async (spec) => {
      await resetDb(orm);
      const order = groupOrder(spec.runs);
      // As one statement (sent as the group commit sends it: EXECUTE with literals on a server), then the
      // runs it left alone, each by itself; or, when it raised, one by one, as the group commit does.
      const b = await build(orm, spec);
      const group = order.map((i) => values(b, spec.runs[i]!, i));
      const [s, v] = SETTLEMENTS_TOGETHER.combine(group, order.map((i) => b.accounts[spec.runs[i]!.account]!))!;
      const answers: (Record<string, unknown> | null | 'refused')[] = new Array(spec.runs.length).fill(null);
      let raised = false;
      let sequence = order;
      try {
        const [rows] = await inOneMessage(orm.em.fork(), [[s, v]]);
        const split = SETTLEMENTS_TOGETHER.split(rows!, group.length);
        const alone = order.filter((_, k) => split[k] === 'alone');
        for (const [k, i] of order.entries()) if (split[k] !== 'alone') answers[i] = (split[k] as Record<string, unknown>[])[0] ?? null;
        for (const i of alone) answers[i] = await single(orm, values(b, spec.runs[i]!, i));
        // What that did is the single statements in this order: the group's runs, then those it left alone.
        sequence = [...order.filter((i) => !alone.includes(i)), ...alone];
        // Left alone: exactly the runs a bundle could pay (its first workflow's), neither fenced out nor hooked.
        const payable = (i: number) => {
          const r = spec.runs[i]!;
          const a = spec.accounts[r.account]!;
          const fenced = r.queued || (r.fenced === 'result' && r.results) || r.fenced === 'timer' || r.unknownTimers || (r.limit !== '5' && r.steps >= 2);
          const hooked = a.hooked === 'all' || (a.hooked === 'failed' && FINISHES[r.finish]![0] === 'failed');
          return r.workflow === 0 && a.bundleRuns > 0 && !fenced && !hooked;
        };
        assert.equal(alone, order.filter(payable), 'the runs left alone');
        together++;
        if (alone.length) leftAlone++;
      } catch (e) {
        if (!isRefusal(e)) throw e;
        raised = true;
        fellBack++;
        for (const i of order) answers[i] = await single(orm, values(b, spec.runs[i]!, i));
      }
      // One by one, in that order.
      const a = await build(orm, spec);
      const oneByOne: (Record<string, unknown> | null | 'refused')[] = new Array(spec.runs.length).fill(null);
      for (const i of sequence) oneByOne[i] = await single(orm, values(a, spec.runs[i]!, i));
      const [x, y] = [await snapshot(orm, a, oneByOne), await snapshot(orm, b, answers)];
      assert.equal(y, x);
      if (raised) {
        const needed = x.answers.includes('refused') || x.ledger.some((l) => (l as { kind?: unknown }).kind === 'unpaid');
        assert.ok(needed, 'the one statement raised although one by one no run was refused or left owing');
      }
    }),
    { numRuns: 100, seed },
  );
  const counts = `${together} answered, ${fellBack} raised, ${leftAlone} with runs left alone (FC_SEED=${seed})`;
  assert.ok(together >= 10, counts);
  assert.ok(fellBack >= 1, counts);
  assert.ok(leftAlone >= 1, counts);
});

t('an account whose balance covers each run’s hold but not the charges one after another makes the one statement raise; one by one the last run is left owing', async ({ orm }) => {
  const run = (displayed: string): RunSpec => ({
    account: 0, workflow: 1, displayed, creator: '0.200000', finish: 0, charge: 'full', steps: 0, extra: '0',
    results: false, fenced: null, queued: false, secrets: false, silent: false, unknownTimers: false, limit: '5',
  });
  const spec = { accounts: [{ wallet: '0.300000', held: '0', hooked: null, bundleRuns: 0, tallied: false }], runs: [run('0.100000'), run('0.050000')] };
  const b = await build(orm, spec);
  const [s, v] = SETTLEMENTS_TOGETHER.combine([0, 1].map((i) => values(b, spec.runs[i]!, i)), [b.accounts[0]!, b.accounts[0]!])!;
  const raised = await inOneMessage(orm.em.fork(), [[s, v]]).then(() => null, (e: unknown) => e);
  assert.ok(isRefusal(raised), `raised ${String(raised)}`);
  for (const i of [0, 1]) assert.ok(await single(orm, values(b, spec.runs[i]!, i)));
  const ledger = await orm.em.fork().execute<{ kind: string; amount_usd: string }[]>(`select kind, amount_usd::text from ledger_entries where account_id = ? and kind in ('charge', 'unpaid') order by id`, [b.accounts[0]]);
  assert.equal(ledger.map((l) => [l.kind, l.amount_usd]), [['charge', '-0.200000'], ['charge', '-0.100000'], ['unpaid', '0.100000']]);
});

t('a group goes statement by statement when it repeats a run, or holds an account the one statement refused for in the last seconds', () => {
  const v = (id: string) => [id, [], [], null, null, '{}', [], 0, '0', ['run.completed'], [null], ['{}'], 'completed', 'completed', null, null, 'full'];
  const [short, other] = [randomUUID(), randomUUID()];
  assert.ok(SETTLEMENTS_TOGETHER.combine([v(randomUUID()), v(randomUUID())], [short, other]));
  const run = randomUUID();
  assert.is(SETTLEMENTS_TOGETHER.combine([v(run), v(run)], [other, other]), null, 'a run twice');
  SETTLEMENTS_TOGETHER.failed!(Object.assign(new Error('deadlock detected'), { code: '40P01' }), [short]);
  assert.ok(SETTLEMENTS_TOGETHER.combine([v(randomUUID()), v(randomUUID())], [short, other]), 'any other failure is not remembered');
  SETTLEMENTS_TOGETHER.failed!(Object.assign(new Error('the wallet balance does not cover the run price'), { code: 'WR001' }), [short]);
  assert.is(SETTLEMENTS_TOGETHER.combine([v(randomUUID()), v(randomUUID())], [other, short]), null, 'an account refused for');
  assert.ok(SETTLEMENTS_TOGETHER.combine([v(randomUUID()), v(randomUUID())], [other, other]), 'the other accounts’ groups');
});

t.run();
