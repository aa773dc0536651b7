import { randomUUID } from 'node:crypto';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { openOrm, type Orm } from '../../src/db/orm.ts';
import { numbered, prepared, withCommit } from '../../src/db/prepared.ts';
import { outsideTransaction, query, statement } from '../../src/db/statement.ts';
import { resetDb, testOrm } from '../helpers/db.ts';
import { messagesWhile } from '../helpers/round-trips.ts';

const unit = suite('prepared statements: placeholders');

unit('each ? becomes $n, an array becomes as many placeholders, a plain object its JSON text', () => {
  const q = numbered('update t set a = ?, b = ?::jsonb where id in (?) and k = any(array[?]::text[])', ['x', { n: 1 }, ['i1', 'i2'], ['k']]);
  assert.equal(q, {
    text: 'update t set a = $1, b = $2::jsonb where id in ($3, $4) and k = any(array[$5]::text[])',
    values: ['x', '{"n":1}', 'i1', 'i2', 'k'],
    expanded: true,
  });
});

unit('null, undefined, numbers and booleans pass as values', () => {
  assert.equal(numbered('select ?, ?, ?, ?', [null, undefined, 1.5, true]), { text: 'select $1, $2, $3, $4', values: [null, null, 1.5, true], expanded: false });
});

unit('statements it cannot translate exactly are left to the ORM', () => {
  assert.is(numbered('select ?', [new Date()]), null, 'dates are formatted by the ORM');
  assert.is(numbered('select * from t where id in (?)', [[]]), null, 'an empty list');
  assert.is(numbered('select ?? from t', ['col']), null, 'identifiers');
  assert.is(numbered('select ?', []), null, 'a missing parameter');
  assert.is(numbered('select 1', ['extra']), null, 'a parameter too many');
  assert.is(numbered('select ?', [[['nested']]]), null, 'nested arrays');
});

unit('a statement name Postgres would fold or cut is refused where it is written', () => {
  assert.throws(() => prepared('Test_Upper', 'select 1'), /lower-case/);
  assert.throws(() => prepared(`test_${'x'.repeat(50)}`, 'select 1'), /at most 52 characters/);
  assert.throws(() => statement('test-dash', 'select 1'), /lower-case/);
  assert.not.throws(() => statement(`test_${'y'.repeat(56)}`, 'select 1'));
});

unit.run();

const db = suite<{ orm: Orm }>('prepared statements: on the database');
db.before(async (ctx) => {
  ctx.orm = await testOrm();
});
db.before.each(async ({ orm }) => resetDb(orm));

const SERVER = Boolean(process.env.DATABASE_URL);
const FIND = prepared('test_find_accounts', 'select id, handle, ? as note from accounts where id in (?) order by handle');

db('a marked statement returns what em.execute returns, in and out of a transaction', async ({ orm }) => {
  const ids = [randomUUID(), randomUUID()];
  const em = orm.em.fork();
  for (const [i, id] of ids.entries()) await em.execute('insert into accounts (id, handle) values (?, ?)', [id, `h${i}`]);
  const plain = await em.execute('select id, handle, ? as note from accounts where id in (?) order by handle', ['n', ids]);
  assert.is(plain.length, 2);
  assert.equal(await em.execute(FIND, ['n', ids]), plain);
  assert.equal(await em.transactional((tx) => tx.execute(FIND, ['n', ids])), plain);
});

db('on a Postgres server a marked statement is prepared once per connection and then only bound', async ({ orm }) => {
  if (!SERVER) {
    console.log('  (skipped on PGlite: it runs in process, marked statements take the ORM path there)');
    return;
  }
  const id = randomUUID();
  await orm.em.fork().execute('insert into accounts (id, handle) values (?, ?)', [id, 'solo']);
  // One transaction keeps one connection, where pg_prepared_statements can be read.
  const counts = await orm.em.fork().transactional(async (tx) => {
    await tx.execute(FIND, ['a', [id]]);
    await tx.execute(FIND, ['b', [id]]);
    const rows = await tx.execute<{ n: number }[]>(
      `select count(*)::int as n from pg_prepared_statements where statement = 'select id, handle, $1 as note from accounts where id in ($2) order by handle'`,
    );
    return rows[0]!.n;
  });
  assert.is(counts, 1);
});

db('on a Postgres server a constant statement is prepared under its site\'s name, a varying one under name_hash', async ({ orm }) => {
  if (!SERVER) {
    console.log('  (skipped on PGlite: it never prepares)');
    return;
  }
  const ONE = prepared('test_named_statement', 'select handle from accounts where id = ?');
  const id = randomUUID();
  await orm.em.fork().execute('insert into accounts (id, handle) values (?, ?)', [id, 'named']);
  const names = await orm.em.fork().transactional(async (tx) => {
    await tx.execute('select 1'); // the first statement goes with the BEGIN, prepared apart
    await tx.execute(ONE, [id]);
    await tx.execute(FIND, ['x', [id]]);
    return (await tx.execute<{ name: string }[]>(`select name from pg_prepared_statements where name like 'test_%' order by name`)).map((r) => r.name);
  });
  assert.ok(names.includes('test_named_statement'), names.join(', '));
  // FIND expands an array into a list, so its text depends on the list's length.
  assert.ok(names.some((n) => /^test_find_accounts_[0-9a-f]{8}$/.test(n)), names.join(', '));
});

db('with prepared statements turned off, a marked statement is sent unprepared', async () => {
  if (!SERVER) {
    console.log('  (skipped on PGlite: it never prepares)');
    return;
  }
  const plain = await openOrm({ databaseUrl: process.env.DATABASE_URL, preparedStatements: false });
  try {
    const n = await plain.em.fork().transactional(async (tx) => {
      await tx.execute(FIND, ['c', [randomUUID()]]);
      return (await tx.execute<{ n: number }[]>('select count(*)::int as n from pg_prepared_statements'))[0]!.n;
    });
    assert.is(n, 0);
  } finally {
    await plain.close(true);
  }
});

db('a failing marked statement raises the ORM error, and the transaction rolls back', async ({ orm }) => {
  const id = randomUUID();
  const insert = prepared('test_insert_account', 'insert into accounts (id, handle) values (?, ?)');
  const em = orm.em.fork();
  await em.execute(insert, [id, 'once']);
  let caught: unknown;
  try {
    await em.transactional(async (tx) => {
      await tx.execute(insert, [randomUUID(), 'other']);
      await tx.execute(insert, [id, 'twice']);
    });
  } catch (err) {
    caught = err;
  }
  assert.ok(caught instanceof Error && /duplicate key|unique/i.test(caught.message), String(caught));
  assert.equal(await em.execute<{ handle: string }[]>('select handle from accounts order by handle'), [{ handle: 'once' }]);
});

const INSERT_LAST = withCommit(prepared('test_insert_last_account', 'insert into accounts (id, handle) values (?, ?)'));
const handles = async (orm: Orm) =>
  (await orm.em.fork().execute<{ handle: string }[]>('select handle from accounts order by handle')).map((r) => r.handle);

db('a withCommit statement ends its transaction: on a server it is committed by the time it returns', async ({ orm }) => {
  let seenBeforeCommit: string[] = [];
  await orm.em.fork().transactional(async (tx) => {
    await tx.execute('insert into accounts (id, handle) values (?, ?)', [randomUUID(), 'first']);
    await tx.execute(INSERT_LAST, [randomUUID(), 'last']);
    // Another connection: on a server the COMMIT travelled with the statement, so both rows are
    // visible before the ORM's own COMMIT; PGlite has one connection and commits as usual after this.
    if (SERVER) seenBeforeCommit = await handles(orm);
  });
  if (SERVER) assert.equal(seenBeforeCommit, ['first', 'last']);
  assert.equal(await handles(orm), ['first', 'last']);
});

db('a withCommit statement is sent the same way again on the same connection (prepared there once)', async ({ orm }) => {
  const em = orm.em.fork();
  for (const handle of ['a', 'b', 'c']) await em.transactional((tx) => tx.execute(INSERT_LAST, [randomUUID(), handle]));
  assert.equal(await handles(orm), ['a', 'b', 'c']);
  if (!SERVER) return;
  // One connection at a time here, and SQL PREPARE shows as from_sql in that connection's list.
  const n = await em.transactional(async (tx) => {
    await tx.execute('select 1');
    return (await tx.execute<{ n: number }[]>(`select count(*)::int as n from pg_prepared_statements where from_sql and name = 'test_insert_last_account_c'`))[0]!.n;
  });
  assert.ok(n <= 1, `prepared ${n} times on one connection`);
});

db('on a server, a statement after a withCommit statement in the same transaction is refused', async ({ orm }) => {
  if (!SERVER) {
    console.log('  (skipped on PGlite: withCommit is a plain statement there)');
    return;
  }
  let caught: unknown;
  await orm.em
    .fork()
    .transactional(async (tx) => {
      await tx.execute(INSERT_LAST, [randomUUID(), 'committed']);
      await tx.execute('insert into accounts (id, handle) values (?, ?)', [randomUUID(), 'never']);
    })
    .catch((err) => (caught = err));
  assert.ok(caught instanceof Error && /followed a withCommit statement/.test(caught.message), String(caught));
  // What the withCommit statement wrote is committed (it said so); the statement after it never ran.
  assert.equal(await handles(orm), ['committed']);
  // The connection went back to the pool in a usable state.
  await orm.em.fork().transactional((tx) => tx.execute(INSERT_LAST, [randomUUID(), 'after']));
  assert.equal(await handles(orm), ['after', 'committed']);
});

db('a caller that throws after its withCommit statement gets its own error, what it committed stays, and the connection is usable', async ({ orm }) => {
  for (let i = 0; i < 12; i++) {
    const attempt = orm.em
      .fork()
      .transactional(async (tx) => {
        await tx.execute(INSERT_LAST, [randomUUID(), `kept${String(i).padStart(2, '0')}`]);
        throw new Error('the caller changed its mind');
      })
      .then(
        () => null,
        (err: unknown) => err,
      );
    // A connection kept by a failed ROLLBACK would leave a later transaction waiting for the pool forever.
    const caught = await Promise.race([attempt, new Promise((r) => setTimeout(() => r(new Error('no connection within 5 s')), 5_000).unref())]);
    assert.match(String(caught), /the caller changed its mind/);
  }
  // More transactions than the pool has connections: none was kept by a failed ROLLBACK.
  assert.is((await handles(orm)).length, SERVER ? 12 : 0, SERVER ? 'committed with the statement' : 'PGlite: rolled back as usual');
});

db('a withCommit statement that fails commits nothing the transaction wrote', async ({ orm }) => {
  const id = randomUUID();
  await orm.em.fork().execute('insert into accounts (id, handle) values (?, ?)', [id, 'existing']);
  let caught: unknown;
  await orm.em
    .fork()
    .transactional(async (tx) => {
      await tx.execute('insert into accounts (id, handle) values (?, ?)', [randomUUID(), 'earlier']);
      await tx.execute(INSERT_LAST, [id, 'duplicate id']);
    })
    .catch((err) => (caught = err));
  assert.ok(caught instanceof Error && /duplicate key|unique/i.test(caught.message), String(caught));
  assert.equal(await handles(orm), ['existing']);
});

const FIRST = prepared('test_first_in_transaction', 'select transaction_timestamp() = statement_timestamp() as together, ? as note');

db('on a server a transaction\'s BEGIN travels with its first statement, named or not, and only with the first', async ({ orm }) => {
  if (!SERVER) {
    console.log('  (skipped on PGlite: no round trips to save)');
    return;
  }
  // A connection prepares the statement first, so the last of a few sequential transactions, on a
  // connection that has it already (the pool hands back the one just released), is looked at.
  let sent: string[] = [];
  for (let i = 0; i < 3; i++) {
    ({ messages: sent } = await messagesWhile(() =>
      orm.em.fork().transactional(async (tx) => {
        await tx.execute(FIRST, ['first']);
        await tx.execute(FIRST, ['second']);
      }),
    ));
  }
  assert.equal(sent, ['begin; test_first_in_transaction_b', 'test_first_in_transaction', 'commit'], 'the BEGIN with the first statement only, before one Sync');
  // A statement without parameters goes as a simple query: in one message the BEGIN and the statement
  // share their start time; sent apart, the BEGIN would be earlier.
  const plain = await orm.em.fork().transactional(async (tx) => {
    const [first] = await tx.execute<{ together: boolean }[]>('select transaction_timestamp() = statement_timestamp() as together');
    return first!.together;
  });
  assert.is(plain, true);
});

const ONLY = withCommit(prepared('test_only_in_transaction', 'insert into accounts (id, handle) values (?, ?) returning transaction_timestamp() = statement_timestamp() as together'));

db('on a server a statement both first and last of its transaction is sent alone, its own transaction committed at one Sync', async ({ orm }) => {
  if (!SERVER) {
    console.log('  (skipped on PGlite: a plain statement there)');
    return;
  }
  // The last of a few sequential transactions, on a connection that has the statement prepared already.
  let seen: { sent: string[]; committed: string[] } | undefined;
  for (let i = 0; i < 3; i++) {
    const { messages } = await messagesWhile(() => orm.em.fork().transactional((tx) => tx.execute(ONLY, [randomUUID(), `only${i}`])));
    seen = { sent: messages, committed: await handles(orm) };
  }
  assert.equal(seen, { sent: ['test_only_in_transaction_c'], committed: ['only0', 'only1', 'only2'] }, 'no BEGIN or COMMIT of its own: the implicit transaction of one Sync');
});

db('on a server a statement both first and last of its transaction that fails is rolled back by the server, and no ROLLBACK is sent', async ({ orm }) => {
  if (!SERVER) {
    console.log('  (skipped on PGlite: a plain statement there)');
    return;
  }
  const id = randomUUID();
  await orm.em.fork().execute('insert into accounts (id, handle) values (?, ?)', [id, 'existing']);
  for (let i = 0; i < 3; i++) {
    let caught: unknown;
    const { messages } = await messagesWhile(() =>
      orm.em
        .fork()
        .transactional((tx) => tx.execute(ONLY, [id, 'duplicate']))
        .catch((err) => (caught = err)),
    );
    assert.ok(caught instanceof Error && /duplicate key|unique/i.test(caught.message), String(caught));
    assert.equal(messages.filter((m) => !/^prepare /.test(m)), ['test_only_in_transaction_c']);
  }
  // The connection is outside any transaction and usable.
  await orm.em.fork().transactional((tx) => tx.execute(ONLY, [randomUUID(), 'after']));
  const [state] = await orm.em.fork().execute<{ n: number }[]>(`select count(*)::int as n from pg_stat_activity where state like 'idle in transaction%' and datname = current_database()`);
  assert.is(state!.n, 0, 'no connection left in a transaction');
  assert.equal(await handles(orm), ['after', 'existing']);
});

const ARRAYS = statement('test_arrays_after_begin', 'select $1::text[] as a, $2::jsonb as j, $3::int as n, $4::uuid[] as ids');

db('a statement sent with the BEGIN gets its arrays, JSON, nulls and quotes as the extended protocol would', async ({ orm }) => {
  const values = [['a', null, 'b"c', "it's", 'back\\slash'], { x: "it's", y: [1, null] }, null, []];
  const alone = await query(orm.em.fork(), ARRAYS, values);
  const first = await orm.em.fork().transactional((tx) => query(tx, ARRAYS, values));
  assert.equal(first, alone);
  assert.equal(first[0]!.a, ['a', null, 'b"c', "it's", 'back\\slash']);
  assert.equal(first[0]!.j, { x: "it's", y: [1, null] });
});

db('a transaction whose first statement fails rolls back, and one that sends nothing commits or rolls back without a word', async ({ orm }) => {
  const id = randomUUID();
  const em = orm.em.fork();
  await em.execute('insert into accounts (id, handle) values (?, ?)', [id, 'existing']);
  const insert = prepared('test_insert_account_first', 'insert into accounts (id, handle) values (?, ?)');
  let caught: unknown;
  await em
    .transactional(async (tx) => {
      await tx.execute(insert, [id, 'duplicate id']);
    })
    .catch((err) => (caught = err));
  assert.ok(caught instanceof Error && /duplicate key|unique/i.test(caught.message), String(caught));
  await em.transactional(async () => undefined);
  await em.transactional(async () => Promise.reject(new Error('nothing sent'))).catch(() => undefined);
  // The connections went back to the pool usable, outside any transaction.
  await em.transactional((tx) => tx.execute(insert, [randomUUID(), 'after']));
  assert.equal(await handles(orm), ['after', 'existing']);
});

db('wr_refuse raises its reason under SQLSTATE WR001, only where the CASE reaches it', async ({ orm }) => {
  const em = orm.em.fork();
  const check = prepared('test_refuse', `select case when ?::boolean then 1 else wr_refuse('refused: ' || ?) end as ok`);
  assert.equal(await em.execute(check, [true, 'x']), [{ ok: 1 }]);
  let caught: unknown;
  await em.execute(check, [false, 'the fence']).catch((err) => (caught = err));
  assert.is((caught as { code?: string }).code, 'WR001');
  assert.match(String((caught as Error).message), 'refused: the fence');
});

const HANDLE = statement('test_outside_transaction_read', 'select handle from accounts where id = $1::uuid');

db('a read outside any transaction returns what a fresh fork reads, and never joins a transaction in progress', async ({ orm }) => {
  const id = randomUUID();
  await orm.em.fork().execute('insert into accounts (id, handle) values (?, ?)', [id, 'outside']);
  const outside = outsideTransaction(orm);
  assert.equal(await query(outside, HANDLE, [id]), await query(orm.em.fork(), HANDLE, [id]));
  assert.equal(await query(outside, HANDLE, [id]), [{ handle: 'outside' }]);
  assert.is(outsideTransaction(orm), outside, 'one per ORM');
  if (!SERVER) return; // PGlite has one connection: a second reader would wait for the transaction, as a fork's does
  const other = randomUUID();
  await orm.em.fork().transactional(async (tx) => {
    await tx.execute('insert into accounts (id, handle) values (?, ?)', [other, 'uncommitted']);
    assert.equal(await query(tx, HANDLE, [other]), [{ handle: 'uncommitted' }]);
    assert.equal(await query(outside, HANDLE, [other]), [], 'the uncommitted row is not seen outside');
  });
  assert.equal(await query(outside, HANDLE, [other]), [{ handle: 'uncommitted' }]);
});

db('outside any transaction it says so, and a transaction it opens commits, or rolls back when its callback throws', async ({ orm }) => {
  const outside = outsideTransaction(orm);
  assert.is(outside.isInTransaction(), false);
  const insert = statement('test_outside_transaction_insert', 'insert into accounts (id, handle) values ($1::uuid, $2::text)');
  await outside.transactional((tx) => query(tx, insert, [randomUUID(), 'committed']));
  const failed = await outside
    .transactional(async (tx) => {
      await query(tx, insert, [randomUUID(), 'rolled back']);
      throw new Error('after the insert');
    })
    .catch((err: Error) => err.message);
  assert.is(failed, 'after the insert');
  assert.equal(await handles(orm), ['committed']);
});

db.run();
