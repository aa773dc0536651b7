import { ReferenceKind, type EntityMetadata, type EntitySchema } from '@mikro-orm/core';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { entities } from '../../src/db/entities/index.ts';
import type { Statement } from '../../src/db/statement.ts';
import { closeTestOrm, testOrm } from '../helpers/db.ts';
import { bareSql, statementColumns, tablesIn } from '../helpers/sql-columns.ts';
import { sqlStatements } from '../helpers/sql-statements.ts';

/**
 * Each statement of src/sql names the entities whose tables it uses (docs/architecture.md#the-database-path),
 * and the columns it uses of them are the entities' columns (MikroORM's metadata, after discovery): a
 * column renamed or dropped on one side, or a required column added to an entity that an insert does not
 * write, fails here rather than at run time.
 */

/**
 * What the pattern reading (test/helpers/sql-columns.ts) cannot follow, per statement; the rest of each
 * is checked. All of these are one reason: an alias that names a table in one scope of the statement and
 * another table, a CTE or a subquery in another, and the reading does not follow scopes, so the columns
 * read through that alias are not checked (inserts and `set` targets of those tables still are).
 */
const UNREAD: Record<string, string[]> = {
  accept_runs: ['alias w: names api_key_rate_windows and workflows'],
  find_workflow_to_run: ['alias w: names api_key_rate_windows and workflows'],
};

interface Table {
  entity: string;
  columns: Set<string>;
  /** Columns an insert must write: not nullable, no default, not generated or a formula. */
  required: string[];
}

async function entityTables(): Promise<Map<string, Table>> {
  const orm = await testOrm();
  const tables = new Map<string, Table>();
  for (const schema of entities) {
    const meta = orm.getMetadata().find(schema as EntitySchema) as EntityMetadata;
    const stored = meta.props.filter(
      (prop) =>
        prop.persist !== false &&
        !prop.formula &&
        (prop.kind === ReferenceKind.SCALAR || prop.kind === ReferenceKind.MANY_TO_ONE || (prop.kind === ReferenceKind.ONE_TO_ONE && prop.owner)),
    );
    const required = meta.view
      ? []
      : stored.filter((prop) => !prop.nullable && prop.default === undefined && prop.defaultRaw === undefined && !prop.autoincrement && !prop.generated);
    tables.set(meta.tableName, {
      entity: meta.className,
      columns: new Set(stored.flatMap((prop) => prop.fieldNames)),
      required: required.flatMap((prop) => prop.fieldNames),
    });
  }
  return tables;
}

const namedTables = (s: Statement) => new Set((s.entities ?? []).map((e) => e.meta.tableName));

test('every statement of src/sql names the entities of the tables it uses, and only tables of entities', async () => {
  const tables = await entityTables();
  for (const s of await sqlStatements()) {
    assert.ok(Array.isArray(s.entities), `${s.name} names no entities (statement's third argument)`);
    const named = namedTables(s);
    const used = [...tablesIn(bareSql(s.text))].filter((t) => tables.has(t));
    for (const table of used) assert.ok(named.has(table), `${s.name} uses ${table} and does not name ${tables.get(table)!.entity}`);
    if (named.size === 0) assert.is(used.length, 0, `${s.name} names no entity`);
  }
});

test("the columns a statement uses of its entities' tables are columns of those entities", async () => {
  const tables = await entityTables();
  for (const s of await sqlStatements()) {
    const named = namedTables(s);
    const { uses, unread } = statementColumns(s.text, named);
    for (const use of uses) {
      const table = tables.get(use.table)!;
      assert.ok(table.columns.has(use.column), `${s.name}: ${use.table}.${use.column} (${use.via}) is no column of ${table.entity}`);
    }
    assert.equal(unread, UNREAD[s.name] ?? [], `${s.name}: what the test cannot read changed; list it in UNREAD with its reason`);
  }
});

test("an insert into an entity's table writes every column the entity requires", async () => {
  const tables = await entityTables();
  let inserts = 0;
  for (const s of await sqlStatements()) {
    for (const insert of statementColumns(s.text, namedTables(s)).inserts) {
      inserts++;
      const table = tables.get(insert.table)!;
      const missing = table.required.filter((column) => !insert.columns.includes(column));
      assert.equal(missing, [], `${s.name}: insert into ${insert.table} leaves out ${missing.join(', ')}, required by ${table.entity}`);
    }
  }
  assert.ok(inserts > 10, `${inserts} inserts found`);
});

test.after(closeTestOrm);
test.run();
