import { migrate, openOrm, type Orm } from '../../src/db/orm.ts';

/**
 * One database per test process: embedded PGlite in memory by default, the server named by
 * DATABASE_URL when set (its public schema is dropped and rebuilt once, so point it at a test database).
 */

let shared: Promise<Orm> | undefined;

export function testDbOptions(): { databaseUrl?: string; dataDir?: string } {
  return process.env.DATABASE_URL ? { databaseUrl: process.env.DATABASE_URL } : { dataDir: 'memory://' };
}

export function testOrm(): Promise<Orm> {
  shared ??= (async () => {
    const orm = await openOrm(testDbOptions());
    if (process.env.DATABASE_URL) {
      await orm.em.fork().execute('drop schema if exists public cascade; create schema public');
    }
    await migrate(orm);
    return orm;
  })();
  return shared;
}

/** Empties every table (but the migrations log) so each suite starts from a known state. */
export async function resetDb(orm: Orm): Promise<void> {
  const em = orm.em.fork();
  const rows = await em.execute<{ tablename: string }[]>(`select tablename from pg_tables where schemaname = 'public' and tablename not like 'mikro_orm%'`);
  await em.execute(`truncate ${rows.map((r) => `"${r.tablename}"`).join(', ')} restart identity cascade`);
}

/** Closes the shared database at process exit (uvu runs every suite in one process). */
export async function closeTestOrm(): Promise<void> {
  if (shared) await (await shared).close(true);
  shared = undefined;
}
