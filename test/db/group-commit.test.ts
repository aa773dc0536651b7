import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { Orm } from '../../src/db/orm.ts';
import { clearGroupTail, inOneMessage, runInGroup, setGroupGather, setGroupTail, type GroupReceipt, type GroupResults, type GroupStatement, type GroupTail } from '../../src/db/group-commit.ts';
import { statement } from '../../src/db/statement.ts';
import { testOrm } from '../helpers/db.ts';

/**
 * Group commit (src/db/group-commit.ts): one-statement transactions asked for while a group of the same
 * statement is in flight go together as one transaction in one message; a group that fails is run again
 * statement by statement, so each caller meets its own outcome.
 */

const onServer = Boolean(process.env.DATABASE_URL);
const t = suite<{ orm: Orm }>(`group commit (${onServer ? 'Postgres server' : 'embedded PGlite'})`);

const PROBE = statement(
  'test_group_commit_probe',
  `insert into group_commit_probe (id, account) values ($1::int, $2::text)
   returning id, account, txid_current()::text as tx, nextval('group_commit_probe_order')::int as seq`,
);

/** Its own kind: PROBE under another name, and the same for a whole group (ids ≥ 1000 are left alone). */
const ONE = statement(
  'test_group_commit_one',
  `insert into group_commit_probe (id, account) values ($1::int, $2::text)
   returning id, account, txid_current()::text as tx, 'one' as via`,
);
const MANY = statement(
  'test_group_commit_many',
  `with x as (select * from unnest($1::int[], $2::text[]) with ordinality as x(id, account, ord)),
   i as (insert into group_commit_probe (id, account) select id, account from x where id < 1000 returning id)
   select x.ord, x.id, x.account, txid_current()::text as tx, 'many' as via, x.id >= 1000 as alone from x order by x.ord`,
);
const TOGETHER: GroupStatement = {
  combine: (group) => [MANY, [group.map((v) => v[0]), group.map((v) => v[1])]],
  split: (rows, size) => {
    const out: (Record<string, unknown>[] | 'alone')[] = new Array(size).fill('alone');
    for (const { ord, alone, ...own } of rows) out[Number(ord) - 1] = alone ? 'alone' : [own];
    return out;
  },
};

/** Another kind of statement (its own name), which takes as long as it is told to. */
const SLOW = statement('test_group_commit_slow', `select $1::int as id, pg_sleep($2::float8) is null as slept`);

/** PROBE's tail in the tests: what its transaction sees of the group (its rows) and its transaction id. */
const TAIL = statement('test_group_commit_tail', `select count(*)::int as n, txid_current()::text as tx from group_commit_probe where id between $1::int and $2::int`);

/** PROBE that first takes a number from a sequence, so each execution is counted even when it fails. */
const TRY = statement(
  'test_group_commit_try',
  `insert into group_commit_probe (id, account) select $1::int, $2::text from (select nextval('group_commit_probe_tries')) t returning id`,
);

t.before(async (ctx) => {
  ctx.orm = await testOrm();
  const em = ctx.orm.em.fork();
  await em.execute('drop table if exists group_commit_probe');
  await em.execute('drop sequence if exists group_commit_probe_order');
  await em.execute('create table group_commit_probe (id int primary key, account text not null)');
  await em.execute('create sequence group_commit_probe_order');
  await em.execute('drop sequence if exists group_commit_probe_tries');
  await em.execute('create sequence group_commit_probe_tries');
  await em.execute(`select nextval('group_commit_probe_tries')`);
});
t.after(async (ctx) => {
  await ctx.orm.em.fork().execute('drop table if exists group_commit_probe');
  await ctx.orm.em.fork().execute('drop sequence if exists group_commit_probe_order');
  await ctx.orm.em.fork().execute('drop sequence if exists group_commit_probe_tries');
});

const probe = (orm: Orm, id: number, account: string) =>
  runInGroup<{ id: number; account: string; tx: string; seq: number }>(orm.em.fork(), PROBE, [id, account], account).then((rows) => rows[0]!);

t('each caller gets its own statement’s rows, and every row is committed', async ({ orm }) => {
  const rows = await Promise.all([1, 2, 3, 4, 5, 6].map((id) => probe(orm, id, `acct-${id % 3}`)));
  assert.equal(rows.map((r) => Number(r.id)), [1, 2, 3, 4, 5, 6]);
  const [n] = await orm.em.fork().execute<{ n: number }[]>('select count(*)::int as n from group_commit_probe where id <= 6');
  assert.is(Number(n!.n), 6);
});


t('statements sent in one message are one transaction: each answers with its rows, and an error undoes them all', async ({ orm }) => {
  const [a, b] = await inOneMessage(orm.em.fork(), [
    [PROBE, [400, 'm']],
    [PROBE, [401, 'm']],
  ]);
  assert.is(Number(a![0]!.id), 400);
  assert.is(Number(b![0]!.id), 401);
  assert.is(a![0]!.tx, b![0]!.tx, 'one transaction');
  try {
    await inOneMessage(orm.em.fork(), [
      [PROBE, [402, 'm']],
      [PROBE, [400, 'm']],
    ]);
    assert.unreachable('the duplicate id must fail');
  } catch (err) {
    assert.match(String(err), /duplicate key|unique/i);
  }
  const [n] = await orm.em.fork().execute<{ n: number }[]>('select count(*)::int as n from group_commit_probe where id = 402');
  assert.is(Number(n!.n), 0, 'the first statement was rolled back with the second');
  const [next] = await inOneMessage(orm.em.fork(), [[PROBE, [403, 'm']]]);
  assert.is(Number(next![0]!.id), 403, 'the connection is usable after the error');
});

/** PROBE as a kind of its own, for gathering (setGroupGather). */
const GATHERED = statement(
  'test_group_commit_gathered',
  `insert into group_commit_probe (id, account) values ($1::int, $2::text) returning id, txid_current()::text as tx`,
);
const gathered = (orm: Orm, id: number) =>
  runInGroup<{ id: number; tx: string }>(orm.em.fork(), GATHERED, [id, 'g'], 'g').then((rows) => ({ ...rows[0]!, at: performance.now() }));

/** Reports how its own prepared statement was planned on the connection it ran on (an array parameter: Postgres would keep planning it anew). */
const PLANS = statement(
  'test_group_commit_plans',
  `select generic_plans::int, custom_plans::int, current_setting('plan_cache_mode') as mode
     from pg_prepared_statements where name like 'test_group_commit_plans%' and 1 = any($1::int[])`,
);

if (onServer) {
  t('a group’s statements run on their generic plans, never planned again for their values; the setting ends with the transaction', async ({ orm }) => {
    const seen: { generic_plans: number; custom_plans: number; mode: string }[] = [];
    // One after another: more executions per connection than Postgres's five custom plans before it compares.
    for (let i = 0; i < 12; i++) {
      const [row] = await runInGroup<(typeof seen)[number]>(orm.em.fork(), PLANS, [[1, i]], 'k');
      seen.push(row!);
    }
    assert.ok(seen.every((r) => r.mode === 'force_generic_plan' && r.custom_plans === 0 && r.generic_plans > 0), JSON.stringify(seen));
    const [inMessage] = await inOneMessage(orm.em.fork(), [[PLANS, [[1]]]]);
    assert.is(inMessage![0]!.mode, 'force_generic_plan', 'a message of several statements too');
    const [after] = await orm.em.fork().execute<{ mode: string }[]>(`select current_setting('plan_cache_mode') as mode`);
    assert.is(after!.mode, 'auto', 'the connection went back to the pool as it was');
  });

  t('transactions asked for while one is in flight are committed together, in the order of their keys', async ({ orm }) => {
    const accounts = ['c', 'a', 'b', 'a', 'c', 'b', 'a', 'c', 'b'];
    const rows = await Promise.all([probe(orm, 100, 'first'), ...accounts.map((a, i) => probe(orm, 101 + i, a))]);
    const [first, ...rest] = rows;
    assert.is(new Set(rest.map((r) => r.tx)).size, 1, 'the nine that waited share one transaction');
    assert.is.not(first!.tx, rest[0]!.tx, 'the first went alone, at once');
    const bySeq = [...rest].sort((x, y) => Number(x.seq) - Number(y.seq)).map((r) => r.account);
    assert.equal(bySeq, [...accounts].sort(), 'run in the order of their keys');
  });

  t('a statement that fails in a group fails alone; the rest of its group is committed', async ({ orm }) => {
    await probe(orm, 200, 'x');
    const settled = await Promise.allSettled([probe(orm, 201, 'x'), probe(orm, 202, 'x'), probe(orm, 200, 'x'), probe(orm, 203, 'x')]);
    assert.equal(settled.map((s) => s.status), ['fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
    assert.match(String((settled[2] as PromiseRejectedResult).reason), /duplicate key|unique/i);
    const [n] = await orm.em.fork().execute<{ n: number }[]>('select count(*)::int as n from group_commit_probe where id between 200 and 203');
    assert.is(Number(n!.n), 4);
  });

  t('a statement alone that raises is run once: its error reaches its caller, and it is not sent again', async ({ orm }) => {
    await probe(orm, 600, 'y');
    // Sequences are not transactional: each execution of TRY leaves its mark, rolled back or not.
    const tries = async () => Number((await orm.em.fork().execute<{ n: string }[]>(`select last_value as n from group_commit_probe_tries`))[0]!.n);
    const before = await tries();
    const outcome = await runInGroup(orm.em.fork(), TRY, [600, 'y'], 'y').then(() => 'accepted', (err: unknown) => String(err));
    assert.match(outcome, /duplicate key|unique/i);
    assert.is(await tries(), before + 1, 'executed once');
    const again = await probe(orm, 601, 'y');
    assert.is(Number(again.id), 601, 'the connection is usable after the error');
  });

  t('a statement alone that raises is run once under a tail whose statements raise nothing, and again alone under any other tail', async ({ orm }) => {
    await probe(orm, 610, 'y');
    const tries = async () => Number((await orm.em.fork().execute<{ n: string }[]>(`select last_value as n from group_commit_probe_tries`))[0]!.n);
    for (const raisesNothing of [true, false]) {
      const tail: GroupTail = { next: () => ({ statements: [[TAIL, [0, 0]]], done: () => false, raisesNothing }) };
      setGroupTail(orm.em, TRY, tail);
      try {
        const before = await tries();
        const outcome = await runInGroup(orm.em.fork(), TRY, [610, 'y'], 'y').then(() => 'accepted', (err: unknown) => String(err));
        assert.match(outcome, /duplicate key|unique/i);
        assert.is(await tries(), before + (raisesNothing ? 1 : 2), raisesNothing ? 'its error is its own' : 'run again alone');
      } finally {
        clearGroupTail(orm.em, TRY, tail);
      }
    }
  });

  t('a kind’s head runs before its group and its tail after it, in the same transaction, and each caller learns whether the tail covered the group', async ({ orm }) => {
    const seen: (GroupResults | null)[] = [];
    const tail: GroupTail = {
      next: () => ({
        head: [[TAIL, [700, 799]]],
        statements: [[TAIL, [700, 799]]],
        done: (results) => {
          seen.push(results);
          return results !== null;
        },
      }),
    };
    assert.ok(setGroupTail(orm.em, PROBE, tail), 'groups are committed on a server');
    try {
      const receipts: GroupReceipt[] = [1, 2, 3].map(() => ({ covered: false }));
      const rows = await Promise.all([701, 702, 703].map((id, i) => runInGroup<{ tx: string }>(orm.em.fork(), PROBE, [id, 't'], 't', receipts[i])));
      assert.ok(receipts.every((r) => r.covered), 'every caller was covered');
      type Counted = { rows: { n: number; tx: string }[] };
      const heads = seen.map((r) => (r!.head[0] as Counted).rows[0]!);
      const tails = seen.map((r) => (r!.tail[0] as Counted).rows[0]!);
      // The first goes alone; the two asked for meanwhile go together: each head sees the rows of the
      // groups before its own, each tail its own group's too.
      assert.equal(heads.map((x) => Number(x.n)), [0, 1]);
      assert.equal(tails.map((x) => Number(x.n)), [1, 3]);
      assert.is(heads[0]!.tx, rows[0]![0]!.tx, 'the head ran in the transaction of the statement');
      assert.is(tails[0]!.tx, rows[0]![0]!.tx, 'the tail ran in the transaction of the statement');
      assert.is(tails[1]!.tx, rows[2]![0]!.tx);
      const own = seen.map((r) => r!.group.map((g) => Number((g as { rows: { id: number }[] }).rows[0]!.id)));
      assert.equal(own, [[701], [702, 703]], 'the tail is given the group’s own results');

      // A group that fails is not covered: its tail hears null, its statements run again alone.
      seen.length = 0;
      const receipt: GroupReceipt = { covered: true };
      const outcome = await runInGroup(orm.em.fork(), PROBE, [701, 't'], 't', receipt).then(() => 'accepted', (err: unknown) => String(err));
      assert.match(outcome, /duplicate key|unique/i);
      assert.equal(seen, [null]);
      assert.is(receipt.covered, true, 'a caller whose statement failed is not told anything');
    } finally {
      clearGroupTail(orm.em, PROBE, tail);
    }
    const after: GroupReceipt = { covered: true };
    await runInGroup(orm.em.fork(), PROBE, [704, 't'], 't', after);
    assert.is(after.covered, false, 'without a tail no group is covered');
  });

  t('a tail that raises or throws costs its group nothing: each statement is still committed and answered', async ({ orm }) => {
    const BAD = statement('test_group_commit_bad_tail', `select 1 / ($1::int - $1::int) as boom`);
    const tails: GroupTail[] = [
      { next: () => ({ statements: [[BAD, [1]]], done: () => true }) },
      {
        next: () => {
          throw new Error('the tail broke');
        },
      },
      {
        next: () => ({
          statements: [[BAD, [1]]],
          done: () => {
            throw new Error('the tail broke on hearing of the failure');
          },
        }),
      },
    ];
    for (const [i, tail] of tails.entries()) {
      setGroupTail(orm.em, PROBE, tail);
      try {
        const [row] = await runInGroup<{ id: number }>(orm.em.fork(), PROBE, [801 + i, 'f'], 'f');
        assert.is(Number(row!.id), 801 + i, `tail ${i + 1}: the statement was answered with its own row`);
      } finally {
        clearGroupTail(orm.em, PROBE, tail);
      }
    }
    const [n] = await orm.em.fork().execute<{ n: number }[]>('select count(*)::int as n from group_commit_probe where id between 801 and 803');
    assert.is(Number(n!.n), 3, 'every statement was committed');
  });

  t('a group of two or more goes as its kind’s one statement; a member it leaves alone runs by itself after the commit; when it raises, each runs by itself', async ({ orm }) => {
    const one = (id: number, receipt?: GroupReceipt) =>
      runInGroup<{ id: number; tx: string; via: string }>(orm.em.fork(), ONE, [id, 'g'], 'g', receipt, TOGETHER).then((rows) => rows[0]!);
    const heard: (GroupResults | null)[] = [];
    const tail: GroupTail = {
      next: () => ({
        statements: [[TAIL, [900, 1999]]],
        done: (results) => {
          heard.push(results);
          return true;
        },
      }),
    };
    setGroupTail(orm.em, ONE, tail);
    try {
      const receipts: GroupReceipt[] = [0, 1, 2, 3].map(() => ({ covered: false }));
      const rows = await Promise.all([900, 901, 1901, 902].map((id, i) => one(id, receipts[i])));
      assert.equal(rows.map((r) => [Number(r.id), r.via]), [[900, 'one'], [901, 'many'], [1901, 'one'], [902, 'many']]);
      assert.is(rows[1]!.tx, rows[3]!.tx, 'the group is one transaction');
      assert.is.not(rows[2]!.tx, rows[1]!.tx, 'the member left alone ran in a transaction of its own');
      assert.equal(receipts.map((r) => r.covered), [true, true, false, true], 'the tail covered the group, not the member written after it');
      const members = heard.map((r) => r!.group.map((g) => (g as { rows: { id: number }[] }).rows.map((row) => Number(row.id))));
      assert.equal(members, [[[900]], [[901], [], [902]]], 'the tail hears each member’s rows, none for the one left alone');
      const ids = (await orm.em.fork().execute<{ id: number }[]>('select id from group_commit_probe where id between 900 and 1999 order by id')).map((r) => Number(r.id));
      assert.equal(ids, [900, 901, 902, 1901]);
      // 910 is taken: the one statement raises, and each runs by itself, meeting its own outcome.
      await one(910);
      const settled = await Promise.allSettled([one(911), one(912), one(910), one(913)]);
      assert.equal(settled.map((x) => x.status), ['fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
      assert.equal(settled.filter((x) => x.status === 'fulfilled').map((x) => (x as PromiseFulfilledResult<{ via: string }>).value.via), ['one', 'one', 'one']);
    } finally {
      clearGroupTail(orm.em, ONE, tail);
    }
  });

  t('a statement of another kind does not wait for a group in flight; one of the same kind does', async ({ orm }) => {
    const done: string[] = [];
    const slow = (id: number, seconds: number) => runInGroup(orm.em.fork(), SLOW, [id, seconds], 'x').then(() => done.push(`slow ${id}`));
    const first = slow(1, 0.3);
    await new Promise((resolve) => setTimeout(resolve, 50)); // the first slow one is on its way
    const second = slow(2, 0);
    const other = probe(orm, 500, 'o').then(() => done.push('other kind'));
    await Promise.all([first, second, other]);
    assert.equal(done, ['other kind', 'slow 1', 'slow 2']);
  });

  t('a statement of a gathering kind that finds it idle waits for others, and those asked for meanwhile commit with it', async ({ orm }) => {
    setGroupGather(orm.em, GATHERED, 150);
    try {
      const t0 = performance.now();
      const first = gathered(orm, 1400);
      await new Promise((resolve) => setTimeout(resolve, 30));
      const rows = await Promise.all([first, gathered(orm, 1401), gathered(orm, 1402)]);
      assert.is(new Set(rows.map((r) => r.tx)).size, 1, 'one transaction for the three');
      assert.ok(rows[0]!.at - t0 >= 140, `the first waited for company (${(rows[0]!.at - t0).toFixed(0)} ms)`);
      // Idle again: the next one waits again, and with no company commits alone.
      const next = await gathered(orm, 1403);
      assert.is.not(next.tx, rows[0]!.tx);
    } finally {
      setGroupGather(orm.em, GATHERED, 0);
    }
    const t1 = performance.now();
    const alone = await gathered(orm, 1404);
    assert.ok(alone.at - t1 < 100, 'without gathering a statement goes at once');
  });

  t('turning gathering off sends a gathering group at once', async ({ orm }) => {
    setGroupGather(orm.em, GATHERED, 60_000);
    const t0 = performance.now();
    const waiting = gathered(orm, 1410);
    await new Promise((resolve) => setTimeout(resolve, 20));
    setGroupGather(orm.em, GATHERED, 0);
    const row = await waiting;
    assert.is(Number(row.id), 1410);
    assert.ok(row.at - t0 < 5_000, 'it did not wait out its minute');
  });
} else {
  t('without a Postgres server every statement is a transaction of its own', async ({ orm }) => {
    const rows = await Promise.all([300, 301, 302].map((id) => probe(orm, id, 'a')));
    assert.is(new Set(rows.map((r) => r.tx)).size, 3);
  });
}

t.run();
