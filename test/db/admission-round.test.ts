import { randomUUID } from 'node:crypto';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { Em, Orm } from '../../src/db/orm.ts';
import { query, statement } from '../../src/db/statement.ts';
import { admitQueuedRunsDetailed } from '../../src/runs/admit-runs.ts';
import type { RunsDeps } from '../../src/runs/deps.ts';
import { ADMIT_QUEUED, admitValues } from '../../src/sql/admit-queued.ts';
import { resetDb, testOrm, insertWorkflow } from '../helpers/db.ts';
import { testRunsDeps } from '../helpers/runs-deps.ts';
import { statementsWhile } from '../helpers/statement-log.ts';

/**
 * An admission round (wr_admit_queued) is one statement, a function that takes its lock and then reads
 * in a snapshot of its own: the queue's order, RUN_CAPACITY, each account's max_concurrent_runs, the
 * engine, the lease and `more`, and rounds that run at once.
 */

const t = suite<{ orm: Orm; deps: RunsDeps }>('admission rounds, one statement each');
t.before(async (ctx) => {
  ctx.orm = await testOrm();
  ctx.deps = testRunsDeps(ctx.orm);
});
t.before.each(async ({ orm }) => resetDb(orm));

const em = (orm: Orm) => orm.em.fork() as unknown as Em;

/** An account (with `limit` max_concurrent_runs, none when null) and a workflow version to run. */
async function account(orm: Orm, limit: number | null = null): Promise<{ accountId: string; versionId: string; workflowId: string }> {
  const f = { accountId: randomUUID(), workflowId: randomUUID(), versionId: randomUUID() };
  await em(orm).execute('insert into accounts (id, handle, max_concurrent_runs) values (?, ?, ?)', [f.accountId, `a${f.accountId.slice(0, 8)}`, limit]);
  await insertWorkflow(em(orm), { id: f.workflowId, ownerId: f.accountId, versionId: f.versionId });
  return f;
}

type Owner = Awaited<ReturnType<typeof account>>;

/** A run of `owner` in `phase` (queued by default), accepted `secondsAgo` seconds ago. */
async function run(orm: Orm, owner: Owner, o: RunOptions = {}) {
  const id = randomUUID();
  await em(orm).execute(
    `insert into runs (id, account_id, workflow_id, version_id, status, phase, user_access, compute_limit_usd, credential_mode, inputs, progress,
                       engine, queued_at, priority, fair_pass)
     values (?, ?, ?, ?, ?, ?, 'wallet', 5, 'service_hosted', '{}', '{"results":{},"timers":{}}', ?, now() - make_interval(secs => ?), ?, ?)`,
    [
      id,
      owner.accountId,
      owner.workflowId,
      owner.versionId,
      o.status ?? 'pending',
      o.phase === undefined ? 'queued' : o.phase,
      o.engine ?? 'embedded',
      o.secondsAgo ?? 0,
      o.priority ?? 1,
      o.pass ?? 0,
    ],
  );
  return id;
}

interface RunOptions {
  secondsAgo?: number;
  status?: string;
  phase?: string | null;
  engine?: string;
  /** Priority class (0 high, 1 normal, 2 low) and pass (docs/design/flow-control.md). */
  priority?: number;
  pass?: number;
}

const round = (deps: RunsDeps, capacity: number, more: Partial<Parameters<typeof admitQueuedRunsDetailed>[1]> = {}) =>
  admitQueuedRunsDetailed(deps, { capacity, engine: 'embedded', expireQueued: false, ...more });

t(
  'a round admits in the queue’s order (by acceptance time within one class and pass) up to RUN_CAPACITY, counting the runs in flight',
  async ({ orm, deps }) => {
    const alice = await account(orm);
    await run(orm, alice, { status: 'running', phase: null });
    const oldest = await run(orm, alice, { secondsAgo: 50 });
    const third = await run(orm, alice, { secondsAgo: 5 });
    const fourth = await run(orm, alice, { secondsAgo: 2 });
    const second = await run(orm, alice, { secondsAgo: 10 });
    await run(orm, alice, { secondsAgo: 1 });
    const r = await round(deps, 5);
    assert.equal(r.admitted, [oldest, second, third, fourth], 'four places free of five');
    assert.ok(
      r.states.every((s) => s.status === 'pending' && s.phase === 'starting' && s.accountId === alice.accountId),
      'their state as admitted',
    );
    assert.is(r.more, true, 'one run is left waiting');
    const next = await round(deps, 5);
    assert.equal(next.admitted, [], 'capacity is full');
    assert.is(next.more, true, 'the run left still waits');
  },
);

t('a round keeps each account within max_concurrent_runs, passing its runs over for later ones of others', async ({ orm, deps }) => {
  const limited = await account(orm, 2);
  const other = await account(orm);
  await run(orm, limited, { status: 'suspended', phase: null });
  const limitedFirst = await run(orm, limited, { secondsAgo: 9 });
  await run(orm, limited, { secondsAgo: 8 });
  const otherFirst = await run(orm, other, { secondsAgo: 7 });
  await run(orm, limited, { secondsAgo: 6 });
  const otherSecond = await run(orm, other, { secondsAgo: 5 });
  const r = await round(deps, 10);
  assert.equal(r.admitted, [limitedFirst, otherFirst, otherSecond]);
  assert.is(r.more, true, 'two runs of the limited account still wait');
  const [{ n }] = await em(orm).execute<{ n: number }[]>(
    `select count(*)::int as n from runs where account_id = ? and (status in ('running', 'suspended') or phase = 'starting')`,
    [limited.accountId],
  );
  assert.is(n, 2, 'the limited account has max_concurrent_runs in flight');
});

t('a round admits only its engine’s runs, says no more wait once the line is empty, and is one statement without BEGIN or COMMIT', async ({ orm, deps }) => {
  const alice = await account(orm);
  const mine = await run(orm, alice, { secondsAgo: 2 });
  await run(orm, alice, { secondsAgo: 3, engine: 'temporal' });
  const { result, sql } = await statementsWhile(
    orm,
    () => round(deps, 10),
    (s) => !s.query.includes('workflow_versions'),
  );
  assert.equal(result.admitted, [mine]);
  assert.is(result.more, false, 'nothing admissible is left for this engine');
  assert.equal(sql, [ADMIT_QUEUED.text], 'the round is one statement');
  const empty = await round(deps, 10);
  assert.equal({ admitted: empty.admitted, more: empty.more }, { admitted: [], more: false });
});

t('with a lease a round claims its runs for the holder and commits without waiting for the disk; without one it does neither', async ({ orm, deps }) => {
  const alice = await account(orm);
  const leased = await run(orm, alice, { secondsAgo: 2 });
  const lease = { owner: 'holder-1', ttlMs: 30_000 };
  const setting = statement('test_synchronous_commit', `select current_setting('synchronous_commit') as v`, []);
  const withLease = await em(orm).transactional(async (tx) => {
    const rows = await query(tx, ADMIT_QUEUED, admitValues({ capacity: 4, engine: 'embedded', window: 100, lease }));
    return { ids: rows.map((r) => r.id), sync: (await query<{ v: string }>(tx, setting, []))[0]!.v };
  });
  assert.equal(withLease, { ids: [leased], sync: 'off' });
  const [row] = await em(orm).execute<{ lease_owner: string; left_ms: number }[]>(
    `select lease_owner, extract(epoch from lease_until - clock_timestamp()) * 1000 as left_ms from runs where id = ?`,
    [leased],
  );
  assert.is(row!.lease_owner, 'holder-1');
  assert.ok(Number(row!.left_ms) > 20_000 && Number(row!.left_ms) <= 30_000, `lease for the ttl (${row!.left_ms} ms left)`);

  const unleased = await run(orm, alice, { secondsAgo: 1 });
  const without = await em(orm).transactional(async (tx) => {
    const rows = await query(tx, ADMIT_QUEUED, admitValues({ capacity: 4, engine: 'embedded', window: 100 }));
    return { ids: rows.map((r) => r.id), sync: (await query<{ v: string }>(tx, setting, []))[0]!.v };
  });
  assert.equal(without, { ids: [unleased], sync: 'on' });
  const [plain] = await em(orm).execute<{ lease_owner: string | null }[]>('select lease_owner from runs where id = ?', [unleased]);
  assert.is(plain!.lease_owner, null);
});

t('a round of one engine takes its own runs in the fair order: higher class first, then the lower pass, then the earlier acceptance', async ({ orm, deps }) => {
  const alice = await account(orm);
  const lateLowPass = await run(orm, alice, { secondsAgo: 1, pass: 1 });
  const early = await run(orm, alice, { secondsAgo: 9, pass: 2 });
  const high = await run(orm, alice, { secondsAgo: 0, pass: 7, priority: 0 });
  await run(orm, alice, { secondsAgo: 20, pass: 1, priority: 0, engine: 'temporal' });
  const low = await run(orm, alice, { secondsAgo: 30, pass: 0, priority: 2 });
  const order = [];
  for (let capacity = 1; capacity <= 5; capacity++) order.push(...(await round(deps, capacity)).admitted);
  assert.equal(order, [high, lateLowPass, early, low], 'the high run, the normal ones by pass, the low one; never the temporal run');
});

t('rounds at once never admit past RUN_CAPACITY: each reads the queue after the one before it committed', async ({ orm, deps }) => {
  const owners = await Promise.all([account(orm), account(orm), account(orm)]);
  // Two engines' rounds pick different runs, so only the in-flight count they share keeps them within capacity.
  for (let i = 0; i < 40; i++) await run(orm, owners[i % 3]!, { secondsAgo: 100 - i, engine: i % 2 ? 'embedded' : 'temporal' });
  const rounds = await Promise.all(Array.from({ length: 8 }, (_, i) => round(deps, 7, { engine: i % 2 ? 'embedded' : 'temporal' })));
  const admitted = rounds.flatMap((r) => r.admitted);
  assert.is(admitted.length, 7, 'seven admitted over all the rounds');
  assert.is(new Set(admitted).size, 7, 'none twice');
});

t.run();
