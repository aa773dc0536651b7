import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { Orm } from '../../src/db/orm.ts';
import { testOrm } from '../helpers/db.ts';

/**
 * Embedded PGlite answers queries inside the event loop, so back-to-back queries could keep it from
 * ever reaching pending I/O. The service must stay responsive while the engine works: I/O callbacks
 * get their turn between statements, on PGlite as on a server (where every query waits on a socket).
 */

const t = suite<{ orm: Orm }>('database access leaves the event loop to I/O');
t.before(async (ctx) => {
  ctx.orm = await testOrm();
});

t('I/O callbacks run between the statements of a long chain of awaited queries', async ({ orm }) => {
  const em = orm.em.fork();
  let done = 0;
  const seenAt: number[] = [];
  // Stands for an HTTP request that arrives while the engine runs queries back to back.
  const poll = () =>
    setImmediate(() => {
      seenAt.push(done);
      if (done < 200) poll();
    });
  poll();
  for (let i = 0; i < 200; i++) {
    await em.execute('select 1 as one');
    done++;
  }
  assert.ok(seenAt.length >= 100, `I/O ran ${seenAt.length} times during 200 queries (at ${seenAt.slice(0, 10).join(', ')}…)`);
  assert.ok(seenAt[1]! < 10, 'I/O ran early in the chain, not after it');
});

t('a transaction still sees its own writes and commits once', async ({ orm }) => {
  const em = orm.em.fork();
  await em.execute('create table if not exists fairness_probe (n int)');
  const seen = await em.transactional(async (tx) => {
    for (let i = 0; i < 20; i++) await tx.execute('insert into fairness_probe (n) values (?)', [i]);
    const [row] = await tx.execute<{ c: number }[]>('select count(*)::int as c from fairness_probe');
    return Number(row!.c);
  });
  assert.is(seen, 20);
  await em.execute('drop table fairness_probe');
});

t.run();
