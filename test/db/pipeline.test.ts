import fc from 'fast-check';
import pg from 'pg';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
// @ts-expect-error pg/lib/result has no type declarations
import PgResult from 'pg/lib/result.js';
import { pipelined, rowShape, shapedResult, type Described } from '../../src/db/pipeline.ts';
import { testOrm } from '../helpers/db.ts';

/**
 * src/db/pipeline.ts: prepared statements bound and executed with the extended protocol before one Sync,
 * as one transaction. Only on a Postgres server (PGlite runs in process and never takes this path).
 */

const url = process.env.DATABASE_URL;
const t = suite<{ client: pg.Client }>('statements of one transaction before one Sync (Postgres server)');

const TYPES = `select $1::text[] as texts, $2::jsonb as doc, $3::numeric as amount, $4::bool as flag,
  $5::timestamptz as at, $6::int8 as big, $7::text as plain, $8::int[] as ints`;

t.before(async (ctx) => {
  await testOrm(); // the schema the other suites expect, whatever order they run in
  ctx.client = new pg.Client({ connectionString: url });
  await ctx.client.connect();
  await ctx.client.query('create temporary table pipeline_probe (id int primary key, note text)');
  await ctx.client.query(`prepare pipeline_types as ${TYPES}`);
  await ctx.client.query(`prepare pipeline_insert as insert into pipeline_probe (id, note) values ($1::int, $2::text)`);
  await ctx.client.query(`prepare pipeline_probe_tx as select txid_current()::text as tx, count(*)::int as n from pipeline_probe`);
});
t.after(async ({ client }) => client.end());

const send = (client: pg.Client) => client.query.bind(client) as (submittable: unknown) => unknown;

t('parameters bind and rows parse exactly as with pg’s own query, whatever the values hold', async ({ client }) => {
  const text = fc.string({ unit: 'grapheme', maxLength: 12 });
  const values = fc.tuple(
    fc.array(fc.option(fc.oneof(text, fc.constantFrom('"', '\\', '{', '}', ',', "'", 'NULL', ' '))), { maxLength: 5 }),
    fc.dictionary(text, fc.oneof(text, fc.integer(), fc.boolean())),
    fc.integer({ min: -1e9, max: 1e9 }).map((n) => (n / 1000).toFixed(3)),
    fc.boolean(),
    fc.date({ min: new Date('2000-01-01'), max: new Date('2100-01-01'), noInvalidDate: true }),
    fc.bigInt({ min: -(2n ** 62n), max: 2n ** 62n }).map(String),
    fc.option(text),
    fc.array(fc.integer(), { maxLength: 4 }),
  );
  await fc.assert(
    fc.asyncProperty(values, async (v) => {
      const [mine] = await pipelined(client as never, send(client), [['pipeline_types', v]]);
      const theirs = await client.query(TYPES, v);
      assert.equal(mine!.rows, theirs.rows);
      assert.is(mine!.command, 'SELECT');
    }),
    { numRuns: 60 },
  );
});

t('a statement described once on a connection is read with that description afterwards, without asking Postgres again', async ({ client }) => {
  const described: Described = new Map();
  const v = [['a', null], { k: [1, 'two'] }, '12.500', true, new Date('2031-02-03T04:05:06.789Z'), '9007199254740993', 'x', [3, 4]];
  const [first] = await pipelined(client as never, send(client), [['pipeline_types', v], ['pipeline_insert', [10, 'd']]], described);
  assert.equal([...described.keys()], ['pipeline_types'], 'the select is described; the insert has no rows to describe');
  const [again, inserted] = await pipelined(client as never, send(client), [['pipeline_types', v], ['pipeline_insert', [11, 'e']]], described);
  assert.equal(again!.rows, first!.rows, 'the same values, parsed by the same column types');
  assert.equal(again!.rows, (await client.query(TYPES, v)).rows);
  assert.is(inserted!.rowCount, 1);
  // Proof that no description came back: rows are read with the one kept here, renamed columns and all.
  const renamed = described.get('pipeline_types')!.fields.map((f) => ({ ...(f as object), name: `kept_${(f as { name: string }).name}` }));
  described.set('pipeline_types', rowShape(renamed, client));
  const [kept] = await pipelined(client as never, send(client), [['pipeline_types', v]], described);
  assert.equal(Object.keys(kept!.rows[0]!), ['kept_texts', 'kept_doc', 'kept_amount', 'kept_flag', 'kept_at', 'kept_big', 'kept_plain', 'kept_ints']);
  assert.equal(kept!.rows[0]!.kept_doc, { k: [1, 'two'] });
  await client.query('delete from pipeline_probe where id in (10, 11)');
});

t('a kept statement parses its values by type on every execution without looking up a type parser again', async ({ client }) => {
  const described: Described = new Map();
  const runs = [0, 1, 2, 3].map((i) => [
    [`t${i}`],
    { i, nested: { list: [i, 'x'] } },
    `${i}.250`,
    i % 2 === 0,
    new Date(Date.UTC(2030, 0, 1 + i, 12, 30)),
    String(2n ** 60n + BigInt(i)),
    null,
    [i],
  ]);
  const expected: Record<string, unknown>[][] = [];
  for (const v of runs) expected.push((await client.query(TYPES, v)).rows);
  const own = client.getTypeParser;
  let lookups = 0;
  client.getTypeParser = ((...a: Parameters<typeof own>) => (lookups++, own.apply(client, a))) as typeof own;
  try {
    for (const [i, v] of runs.entries()) {
      const [r] = await pipelined(client as never, send(client), [['pipeline_types', v]], described);
      assert.equal(r!.rows, expected[i], `execution ${i + 1}`);
      assert.is(lookups, 8, 'one parser per column, looked up when the statement was described, never again');
    }
  } finally {
    delete (client as { getTypeParser?: unknown }).getTypeParser;
  }
  const last = expected[3]![0]!;
  assert.equal(last.at, new Date(Date.UTC(2030, 0, 4, 12, 30)));
  assert.equal([last.big, last.amount, last.doc, last.ints], ['1152921504606846979', '3.250', { i: 3, nested: { list: [3, 'x'] } }, [3]]);
});

t('a kept statement is read with the type parsers of its own connection', async ({ client }) => {
  const bigints = new pg.Client({
    connectionString: url,
    types: { getTypeParser: ((oid: number, format?: string) => (oid === 20 ? BigInt : pg.types.getTypeParser(oid, format as 'text'))) as never },
  });
  await bigints.connect();
  try {
    await bigints.query(`prepare pipeline_types as ${TYPES}`);
    const v = [[], {}, '1', true, new Date(0), '9007199254740993', 'x', []];
    const [mine, theirs] = [new Map(), new Map()] as Described[];
    for (let i = 0; i < 2; i++) {
      const [a] = await pipelined(bigints as never, send(bigints), [['pipeline_types', v]], mine);
      const [b] = await pipelined(client as never, send(client), [['pipeline_types', v]], theirs);
      assert.is(a!.rows[0]!.big, 9007199254740993n);
      assert.is(b!.rows[0]!.big, '9007199254740993');
    }
  } finally {
    await bigints.end();
  }
});

t('the statements are one transaction: each answers with its rows, in order', async ({ client }) => {
  const results = await pipelined(client as never, send(client), [
    ['pipeline_insert', [1, 'a']],
    ['pipeline_probe_tx', []],
    ['pipeline_insert', [2, null]],
    ['pipeline_probe_tx', []],
  ]);
  assert.equal(results.map((r) => [r.command, r.rowCount]), [['INSERT', 1], ['SELECT', 1], ['INSERT', 1], ['SELECT', 1]]);
  assert.is(results[1]!.rows[0]!.n, 1);
  assert.is(results[3]!.rows[0]!.n, 2, 'the later statement sees the earlier writes');
  assert.is(results[1]!.rows[0]!.tx, results[3]!.rows[0]!.tx, 'one transaction');
  const after = await client.query('select txid_current()::text as tx');
  assert.is.not(after.rows[0].tx, results[1]!.rows[0]!.tx, 'committed at the Sync: the next statement is another transaction');
});

t('an error skips the rest and undoes all of it, and the connection is usable at once', async ({ client }) => {
  await client.query('truncate pipeline_probe');
  const failed = await pipelined(client as never, send(client), [
    ['pipeline_insert', [10, 'kept?']],
    ['pipeline_insert', [10, 'duplicate']],
    ['pipeline_insert', [11, 'never run']],
  ]).then(
    () => null,
    (e: unknown) => e as { code?: string; severity?: string },
  );
  assert.ok(failed, 'the duplicate key fails the transaction');
  assert.is(failed!.code, '23505');
  assert.is(failed!.severity, 'ERROR');
  // Sent at once, without waiting: pg queues it behind the failed transaction's end.
  const [probe] = await pipelined(client as never, send(client), [['pipeline_probe_tx', []]]);
  assert.is(probe!.rows[0]!.n, 0, 'nothing of the failed transaction was written');
  const status = await client.query('select 1 as one');
  assert.is(status.rows[0].one, 1);
});

t('a BEGIN among them leaves the transaction open after the Sync, and a COMMIT among them ends it', async ({ client }) => {
  await client.query('truncate pipeline_probe');
  const opened = await pipelined(client as never, send(client), [{ text: 'begin' }, ['pipeline_insert', [20, 'open']], ['pipeline_probe_tx', []]]);
  assert.equal(opened.map((r) => r.command), ['BEGIN', 'INSERT', 'SELECT']);
  const inside = await client.query('select txid_current()::text as tx');
  assert.is(inside.rows[0].tx, opened[2]!.rows[0]!.tx, 'still the same transaction after the Sync');
  const closed = await pipelined(client as never, send(client), [['pipeline_insert', [21, 'then']], { text: 'commit' }]);
  assert.equal(closed.map((r) => r.command), ['INSERT', 'COMMIT']);
  const after = await client.query('select count(*)::int as n, txid_current()::text as tx from pipeline_probe');
  assert.is(after.rows[0].n, 2, 'both writes committed');
  assert.is.not(after.rows[0].tx, opened[2]!.rows[0]!.tx);
});

t('a pipeline that cannot be written whole is not sent at all: the connection is closed and nothing is written', async ({ client }) => {
  const doomed = new pg.Client({ connectionString: url });
  await doomed.connect();
  const closed: unknown[] = [];
  doomed.on('error', (e) => closed.push(e));
  // pipeline_probe is a temporary table of the other session: this one writes a table of its own.
  await doomed.query('create table if not exists pipeline_probe_doomed (id int primary key)');
  await doomed.query('truncate pipeline_probe_doomed');
  await doomed.query('prepare doomed_insert as insert into pipeline_probe_doomed (id) values ($1::int)');
  const proto = (pg as unknown as { Connection: { prototype: { execute: (...a: unknown[]) => unknown } } }).Connection.prototype;
  const execute = proto.execute;
  let calls = 0;
  proto.execute = function (this: unknown, ...a: unknown[]) {
    if (++calls === 2) throw new Error('the second message could not be built');
    return execute.apply(this, a);
  };
  let failed: unknown;
  try {
    failed = await pipelined(doomed as never, send(doomed), [['doomed_insert', [1]], ['doomed_insert', [2]]]).then(
      () => null,
      (e: unknown) => e,
    );
  } finally {
    proto.execute = execute;
  }
  try {
    assert.match(String(failed), /could not be built/);
    assert.ok(closed.length > 0, 'the connection was closed');
    await new Promise((r) => setTimeout(r, 100)); // time for anything that was sent to be run
    const held = await client.query(
      `select count(*)::int as n from pg_locks l join pg_class c on c.oid = l.relation where c.relname = 'pipeline_probe_doomed' and l.mode = 'RowExclusiveLock'`,
    );
    assert.is(held.rows[0].n, 0, 'no session holds a write it was never told to commit or roll back');
    const [n] = (await client.query('select count(*)::int as n from pipeline_probe_doomed')).rows;
    assert.is(n.n, 0, 'the buffered first statement never reached the server');
  } finally {
    await doomed.end().catch(() => undefined);
    await client.query('drop table if exists pipeline_probe_doomed');
  }
});

const shapes = suite('row shapes kept for described statements');

shapes('a result given a kept row shape holds what pg’s addFields makes of the same fields, and parses rows alike', () => {
  const fields = [
    { name: 'at', dataTypeID: 1184, format: 'text' },
    { name: 'big', dataTypeID: 20, format: 'text' },
    { name: 'doc', dataTypeID: 3802, format: 'text' },
    { name: 'amount', dataTypeID: 1700, format: 'text' },
  ];
  const types = pg.types as never;
  const byPg = new PgResult(undefined, types);
  byPg.addFields(fields);
  const shape = rowShape(fields, types);
  const kept = [shapedResult(types, shape), shapedResult(types, shape)];
  // Every field of the Result: a field a later pg sets in addFields and the shape misses shows here.
  for (const r of kept) assert.equal({ ...r }, { ...byPg });
  const raw = ['2030-01-01 12:30:00+00', '9007199254740993', '{"a":[1]}', '1.50'];
  const row = kept[0]!.parseRow(raw);
  assert.equal(row, byPg.parseRow(raw));
  row.doc = 'changed';
  assert.equal(kept[1]!.parseRow(raw), byPg.parseRow(raw), 'a row is its own copy: nothing kept changes with it');
});

shapes.run();

if (url) t.run();
else console.log('  SKIPPED (PGlite): statements of one transaction before one Sync — they are only sent to a Postgres server');
