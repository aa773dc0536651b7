import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { Batch } from '../../src/db/batch.ts';
import type { Orm } from '../../src/db/orm.ts';
import { outsideTransaction, statement } from '../../src/db/statement.ts';
import { testOrm } from '../helpers/db.ts';
import { statementsWhile } from '../helpers/statement-log.ts';

/**
 * src/db/batch.ts: calls of one set-based statement that arrive while an execution is in flight go
 * together as the next; each call gets its own rows; calls sharing an apart key never share an
 * execution; an execution that fails runs each of its calls alone.
 */

const t = suite<{ orm: Orm }>('one set-based statement answering many callers');

// 100 / x: a call with x = 0 raises, and with it the whole execution it shares.
const DIVIDE = statement(
  'test_batch_divide',
  `select call.ord, 100 / call.x as quotient, call.tag
     from unnest($1::int[], $2::text[]) with ordinality as call(x, tag, ord)
    cross join generate_series(1, call.x % 3 + 1) as copies`,
  [],
);

interface Call {
  x: number;
  tag: string;
}

const spec = { statement: DIVIDE, values: (calls: readonly Call[]) => [calls.map((c) => c.x), calls.map((c) => c.tag)] };

t.before(async (ctx) => {
  ctx.orm = await testOrm();
});

const executions = (sql: string[]) => sql.filter((text) => text === DIVIDE.text).length;

t('concurrent calls share executions and each gets its own rows', async ({ orm }) => {
  const batch = new Batch<Call>(spec);
  const em = outsideTransaction(orm);
  const { result, sql } = await statementsWhile(orm, () =>
    Promise.all(Array.from({ length: 20 }, (_, i) => batch.run(em, { x: i + 1, tag: `call-${i + 1}` }))),
  );
  result.forEach((rows, i) => {
    const x = i + 1;
    assert.is(rows.length, (x % 3) + 1, `call ${x}: one row per copy`);
    for (const row of rows) {
      assert.equal(Object.keys(row).sort(), ['quotient', 'tag'], 'ord is not passed on');
      assert.is(row.tag, `call-${x}`);
      assert.is(Number(row.quotient), Math.floor(100 / x));
    }
  });
  assert.ok(executions(sql) < 20, `20 calls in ${executions(sql)} executions`);
  assert.ok(executions(sql) >= 2, 'the first call goes at once, alone');
});

t('calls with one apart key never share an execution', async ({ orm }) => {
  const batch = new Batch<Call>({ ...spec, apartKey: (call) => call.tag });
  const em = outsideTransaction(orm);
  const { result, sql } = await statementsWhile(orm, () => Promise.all([1, 2, 3, 4, 5, 6].map((x) => batch.run(em, { x, tag: x % 2 === 0 ? 'even' : 'odd' }))));
  assert.equal(
    result.map((rows) => rows[0]!.tag),
    ['odd', 'even', 'odd', 'even', 'odd', 'even'],
  );
  // The first goes alone; then at most one odd and one even per execution.
  assert.ok(executions(sql) >= 4, `${executions(sql)} executions`);
});

t('a failed execution runs each call alone: only the failing call fails', async ({ orm }) => {
  const batch = new Batch<Call>(spec);
  const em = outsideTransaction(orm);
  const first = batch.run(em, { x: 7, tag: 'first' });
  const together = [4, 0, 5].map((x) =>
    batch.run(em, { x, tag: `x${x}` }).then(
      (rows) => rows[0]!.quotient,
      (error: Error) => error,
    ),
  );
  assert.is(Number((await first)[0]!.quotient), 14);
  const [four, zero, five] = await Promise.all(together);
  assert.is(Number(four), 25);
  assert.ok(zero instanceof Error && /division by zero/.test(zero.message), String(zero));
  assert.is(Number(five), 20);
});

t('a call inside a transaction runs at once in it', async ({ orm }) => {
  const batch = new Batch<Call>(spec);
  const rows = await orm.em.fork().transactional(async (tx) => {
    await tx.execute('create temporary table batch_probe (n int) on commit drop');
    return batch.run(tx, { x: 50, tag: 'inside' });
  });
  assert.equal(
    rows.map((row) => Number(row.quotient)),
    [2, 2, 2],
  );
});

t('gathering: a lone call waits for others and they go as one execution', async ({ orm }) => {
  const batch = new Batch<Call>({ ...spec, gatherMs: 300 });
  const em = outsideTransaction(orm);
  const { sql } = await statementsWhile(orm, async () => {
    const first = batch.run(em, { x: 1, tag: 'a' });
    await new Promise((resolve) => setTimeout(resolve, 5));
    await Promise.all([first, batch.run(em, { x: 2, tag: 'b' })]);
  });
  assert.is(executions(sql), 1);
});

t.run();
