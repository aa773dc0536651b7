import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { App } from '../../src/app.ts';
import type { ApiError } from '../../src/domain/errors.ts';
import { PostgresWindowLimiter } from '../../src/runs/rate-limiter.ts';
import { startPeerApp, startTestApp, type TestApp } from '../helpers/app.ts';
import { testOrm } from '../helpers/db.ts';
import { HOLD_ACCEPTANCES, RUNS_ACCEPTANCE } from '../helpers/held-acceptances.ts';
import { hashApiKey } from '../../src/security/crypto.ts';

/**
 * The POST /runs window is one per key for the whole deployment: on a Postgres server every API
 * process counts in the same row. Two apps on the same database stand for two processes here (the
 * limiter keeps nothing in memory, so a process boundary changes nothing it depends on).
 */

interface Ctx {
  a: TestApp;
  b: App;
  bBase: string;
}
const t = suite<Ctx>('rate limit shared by the API processes of one database');

if (!process.env.DATABASE_URL) {
  console.log('  rate limit shared: skipped — needs a Postgres server (DATABASE_URL); embedded PGlite is one process');
} else {
  t.before(async (ctx) => {
    ctx.a = await startTestApp();
    ({ app: ctx.b, base: ctx.bBase } = await startPeerApp());
  });
  t.after(async (ctx) => {
    await ctx.b?.close();
    await ctx.a?.close();
  });

  const post = (base: string, key: string) =>
    fetch(`${base}/runs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ workflow: 'aaaaaaaa-0000-4000-8000-000000000001', inputs: { topic: 'x' } }),
    });

  t('a key limited to 3 per minute gets its 4th request refused by whichever process answers it', async (ctx) => {
    const key = 'wr_test_bob_slow'; // 3 per minute
    const bases = [ctx.a.base, ctx.bBase, ctx.a.base, ctx.bBase, ctx.a.base];
    const answers = [];
    for (const base of bases) {
      const res = await post(base, key);
      answers.push({ status: res.status, remaining: res.headers.get('ratelimit-remaining'), limit: res.headers.get('ratelimit-limit') });
      await res.text();
    }
    assert.equal(
      answers.map((a) => a.status),
      [202, 202, 202, 429, 429],
    );
    assert.equal(
      answers.slice(0, 3).map((a) => a.remaining),
      ['2', '1', '0'],
      'the same RateLimit headers whichever process answers',
    );
    assert.ok(answers.every((a) => a.limit === '3'));
  });

  t('concurrent requests of one key from two processes never exceed the limit', async (ctx) => {
    const orm = await testOrm();
    const [k] = await orm.em.fork().execute<{ id: string }[]>('select id from api_keys limit 1');
    const a = new PostgresWindowLimiter(orm);
    const b = new PostgresWindowLimiter(orm);
    const id = k!.id;
    await orm.em.fork().execute('delete from api_key_rate_windows where api_key_id = ?', [id]);
    const results = await Promise.allSettled(Array.from({ length: 24 }, (_, i) => (i % 2 ? a : b).hit(id, 7)));
    const ok = results.filter((r) => r.status === 'fulfilled');
    const refused = results.filter((r) => r.status === 'rejected');
    assert.is(ok.length, 7);
    assert.ok(refused.every((r) => (r.reason as ApiError).code === 'rate_limited'));
    const remaining = ok.map((r) => (r as PromiseFulfilledResult<{ remaining: number }>).value.remaining).sort();
    assert.equal(remaining, [0, 1, 2, 3, 4, 5, 6], 'each counted request saw the ones before it');
    // A refused request is not counted: the window still holds exactly the 7.
    const [w] = await orm.em
      .fork()
      .execute<{ n: number; buckets: number }[]>(
        'select (select sum(c) from unnest(counts) c) as n, cardinality(counts) as buckets from api_key_rate_windows where api_key_id = ?',
        [id],
      );
    assert.is(Number(w!.n), 7);
    assert.is(Number(w!.buckets), 60, 'the window is 60 one-second buckets, whatever the limit');
  });

  t('the window keeps its total equal to the sum of its buckets as its seconds pass', async () => {
    const orm = await testOrm();
    const db = orm.em.fork();
    const [k] = await db.execute<{ id: string }[]>('select id from api_keys limit 1');
    const id = k!.id;
    const limiter = new PostgresWindowLimiter(orm);
    await db.execute('delete from api_key_rate_windows where api_key_id = ?', [id]);
    const row = async () =>
      (
        await db.execute<{ total: number; sum: number }[]>(
          'select total, (select sum(c) from unnest(counts) c)::int as sum from api_key_rate_windows where api_key_id = ?',
          [id],
        )
      )[0]!;
    for (let i = 0; i < 4; i++) await limiter.hit(id, 1000);
    // Moving the row's newest second back by n stands for n seconds passing; forward, for a statement
    // that started before the row's second. Shifts of one, several, all and more than all the buckets.
    for (const n of [1, 1, 3, -2, 30, 59, 1, 0, 60, 75]) {
      await db.execute('update api_key_rate_windows set second = second - ?, total_second = total_second - ? where api_key_id = ?', [n, n, id]);
      const { remaining } = await limiter.hit(id, 1000);
      const w = await row();
      assert.is(Number(w.total), Number(w.sum), `after a shift of ${n}: the total is the sum of the buckets`);
      assert.is(remaining, 1000 - Number(w.sum), `after a shift of ${n}: the answer counts what the buckets hold`);
      if (n >= 60) assert.is(Number(w.total), 1, 'a whole window gone leaves only this request');
    }
    // A row whose buckets an older version moved on without its total (it kept no total_second): added up again.
    await db.execute('update api_key_rate_windows set second = second - 1, total = 57, total_second = null where api_key_id = ?', [id]);
    await limiter.hit(id, 1000);
    const healed = await row();
    assert.is(Number(healed.total), Number(healed.sum), 'a total an older version did not keep is added up again');
    const full = await limiter.hit(id, Number((await row()).total)).then(
      () => 'counted',
      (err: ApiError) => err.code,
    );
    assert.is(full, 'rate_limited', 'a window at its limit refuses the request');
    const w = await row();
    assert.is(Number(w.total), Number(w.sum), 'a refused request changes neither');
  });

  t('concurrent valid requests of one key counted by their workflow reads never exceed the limit', async (ctx) => {
    const key = 'wr_test_bob_slow'; // 3 per minute
    const db = ctx.a.deps.orm.em.fork();
    await db.execute('delete from api_key_rate_windows');
    const runsBefore = Number((await db.execute<{ n: number }[]>('select count(*)::int as n from runs'))[0]!.n);
    const answers = await Promise.all(
      Array.from({ length: 12 }, async (_, i) => {
        const res = await fetch(`${i % 2 ? ctx.a.base : ctx.bBase}/runs`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'idempotency-key': `shared-window-${i}` },
          body: JSON.stringify({ workflow: 'aaaaaaaa-0000-4000-8000-000000000001', inputs: { topic: `x${i}` } }),
        });
        await res.text();
        return { status: res.status, remaining: res.headers.get('ratelimit-remaining') };
      }),
    );
    const accepted = answers.filter((a) => a.status === 202);
    assert.is(accepted.length, 3);
    assert.ok(answers.every((a) => a.status === 202 || a.status === 429));
    assert.equal(accepted.map((a) => a.remaining).sort(), ['0', '1', '2']);
    const runsAfter = Number((await db.execute<{ n: number }[]>('select count(*)::int as n from runs'))[0]!.n);
    assert.is(runsAfter - runsBefore, 3);
    const [claimed] = await db.execute<{ n: number }[]>(`select count(*)::int as n from idempotency_records where key like 'shared-window-%'`);
    assert.is(Number(claimed!.n), 3, 'refused requests claimed no idempotency key');
  });

  t('requests of one key whose acceptances wait in Postgres in two processes are each counted once and accepted', async (ctx) => {
    // Acceptances held (test/helpers/held-acceptances.ts) wait in Postgres. Whether a request was counted by
    // its workflow read or by its acceptance, it is counted once.
    const key = 'wr_test_carol';
    const db = ctx.a.deps.orm.em.fork();
    await db.execute('delete from api_key_rate_windows');
    const orm = await testOrm();
    const holder = orm.em.fork();
    const counted = async () => {
      const [w] = await db.execute<{ n: number | null }[]>(
        `select (select sum(c) from unnest(counts) c) as n from api_key_rate_windows w join api_keys k on k.id = w.api_key_id where k.key_hash = ?`,
        [hashApiKey(key)],
      );
      return Number(w?.n ?? 0);
    };
    let answers!: Promise<number[]>;
    const waited = await holder.transactional(async (tx) => {
      await tx.execute(HOLD_ACCEPTANCES);
      answers = Promise.all(
        [0, 1].map(async (i) => {
          const res = await fetch(`${i ? ctx.a.base : ctx.bBase}/runs`, {
            method: 'POST',
            headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'idempotency-key': `held-${i}` },
            body: JSON.stringify({ workflow: 'aaaaaaaa-0000-4000-8000-000000000001', inputs: { topic: `g${i}` } }),
          });
          await res.text();
          return res.status;
        }),
      );
      let waiting = 0;
      for (let i = 0; i < 100 && waiting < 2; i++) {
        await new Promise((r) => setTimeout(r, 50));
        const [w] = await tx.execute<{ n: number }[]>(`select count(*)::int as n from pg_stat_activity
            where pid <> pg_backend_pid() and ${RUNS_ACCEPTANCE}
              and wait_event_type = 'Lock'`);
        waiting = Number(w!.n);
      }
      return waiting;
    });
    assert.ok(waited >= 1, 'the acceptances waited while they were held');
    assert.equal(await answers, [202, 202]);
    assert.is(await counted(), 2, 'each request counted once');
  });
}

t.run();
