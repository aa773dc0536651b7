import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { overParameterised, root, sqlStatements, tsFiles } from '../helpers/sql-statements.ts';

/**
 * The SQL statements of src/sql/ (src/db/statement.ts): a statement's name is its prepared-statement
 * name, so the name a Postgres log shows must lead to one file, and its text must be constant with
 * `$n` placeholders.
 */

const sources = [...tsFiles('src'), ...tsFiles('workflows')].map((path) => ({ path, text: readFileSync(join(root, path), 'utf8') }));

test('every statement of src/sql has its own snake_case name', async () => {
  const statements = await sqlStatements();
  assert.ok(statements.length > 50, `${statements.length} statements found`);
  const names = statements.map((s) => s.name);
  const twice = names.filter((n, i) => names.indexOf(n) !== i);
  assert.equal(twice, [], `names used twice: ${twice.join(', ')}`);
  for (const n of names) assert.match(n, /^[a-z][a-z0-9_]*$/, n);
});

test("a statement's name, as a Postgres log shows it, is written in exactly one source file", async () => {
  for (const { name } of await sqlStatements()) {
    const files = sources.filter((f) => f.text.includes(`'${name}'`)).map((f) => f.path);
    assert.is(files.length, 1, `'${name}' is written in ${files.length ? files.join(', ') : 'no file'}`);
  }
});

test('statement texts use $1…$n, each number at least once, and no ? placeholder', async () => {
  for (const s of await sqlStatements()) {
    const numbers = new Set([...s.text.matchAll(/\$(\d+)/g)].map((m) => Number(m[1])));
    const max = Math.max(0, ...numbers);
    for (let i = 1; i <= max; i++) assert.ok(numbers.has(i), `${s.name}: $${i} is never used (up to $${max})`);
    assert.not.match(s.text, /(^|[\s(,=])\?(?=[\s,)]|::|$)/, `${s.name} has a ? placeholder`);
  }
});

test('no statement takes more than 8 positional parameters: a larger call is one JSON parameter with named fields', async () => {
  const placeholders = (n: number) => Array.from({ length: n }, (_, i) => `$${i + 1}`).join(', ');
  const made = (n: number) => ({ name: `made_of_${n}`, text: `select * from wr_made(${placeholders(n)})` });
  assert.equal(overParameterised([made(8), made(9)]), ['made_of_9 ($9)'], 'the check tells eight from nine');
  assert.equal(overParameterised(await sqlStatements()), []);
});

test.run();
