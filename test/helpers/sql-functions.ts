import * as assert from 'uvu/assert';
import type { Orm } from '../../src/db/orm.ts';

/**
 * Replaces SQL functions of the schema (a rule defined once: src/db/entities/routines.ts) with `replacements`
 * (create or replace statements) and returns what puts the originals back.
 */
export async function replaceFunctions(orm: Orm, names: readonly string[], replacements: readonly string[]): Promise<() => Promise<void>> {
  const em = orm.em.fork();
  const defs = await em.execute<{ def: string }[]>(`select pg_get_functiondef(p.oid) as def from pg_proc p where p.proname in (?) order by p.proname`, [names]);
  assert.is(defs.length, names.length, 'the migrations created every function');
  for (const sql of replacements) await em.execute(sql);
  return async () => {
    for (const { def } of defs) await orm.em.fork().execute(def);
  };
}
