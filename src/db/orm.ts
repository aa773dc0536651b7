import { mkdirSync } from 'node:fs';
import { resolve } from 'node:path';
import type { EntityManager as CoreEntityManager } from '@mikro-orm/core';
import { Migrator } from '@mikro-orm/migrations';
import { MikroORM as PgMikroORM, type EntityManager as PgEntityManager } from '@mikro-orm/postgresql';
import { MikroORM as PgliteMikroORM } from '@mikro-orm/pglite';
import { entities } from './entities/index.ts';
import { migrations } from './migrations/index.ts';

/**
 * Postgres everywhere: a real server when DATABASE_URL is set, embedded PGlite otherwise. Both speak
 * the same SQL, so services write plain Postgres and never branch on the driver.
 */

export type Orm = PgMikroORM;
/** Both drivers' entity managers share the SQL API; services type against this one. */
export type Em = PgEntityManager;

export interface DbOptions {
  databaseUrl?: string;
  /** Directory of the embedded database; `memory://` keeps it in memory (tests). */
  dataDir?: string;
  debug?: boolean;
}

export function describeDb(opts: DbOptions): string {
  if (opts.databaseUrl) return opts.databaseUrl.replace(/\/\/([^:@/]+):[^@/]*@/, '//$1:***@');
  return `pglite:${opts.dataDir ?? 'memory://'}`;
}

export async function openOrm(opts: DbOptions): Promise<Orm> {
  const common = {
    entities,
    extensions: [Migrator],
    migrations: { migrationsList: migrations, transactional: true, allOrNothing: true, snapshot: false, silent: true },
    debug: opts.debug ?? false,
    // Services fork their own entity managers; touching the global one is a bug we want loud.
    allowGlobalContext: false,
    forceUtcTimezone: true,
  };
  if (opts.databaseUrl) {
    return (await PgMikroORM.init({ ...common, clientUrl: opts.databaseUrl, pool: { min: 0, max: 10 } })) as unknown as Orm;
  }
  let dataDir = opts.dataDir ?? 'memory://';
  if (!dataDir.startsWith('memory:')) {
    dataDir = resolve(dataDir, 'pg');
    mkdirSync(dataDir, { recursive: true });
  }
  // Both drivers share the SQL entity manager API; services only use that surface.
  const orm = (await PgliteMikroORM.init({ ...common, dbName: dataDir })) as unknown as Orm;
  yieldBeforeQueries(orm);
  return orm;
}

/**
 * PGlite answers a query inside the event loop (WASM) without waiting on any I/O, so a chain of
 * awaited queries (the engine driving runs, each query resolving the next one's turn) would keep the
 * loop to itself and starve HTTP requests and sockets. Every statement first lets pending I/O run.
 */
function yieldBeforeQueries(orm: Orm): void {
  const connection = orm.em.getConnection() as unknown as { execute: (...args: unknown[]) => Promise<unknown> };
  const execute = connection.execute.bind(connection);
  connection.execute = async (...args: unknown[]) => {
    await new Promise<void>((resolve) => setImmediate(resolve));
    return execute(...args);
  };
}

/** Applies pending migrations; a no-op on an up-to-date database. Returns the names applied. */
export async function migrate(orm: Orm): Promise<string[]> {
  const applied = await orm.migrator.up();
  return applied.map((m) => m.name);
}

export function em(orm: Orm): Em {
  return orm.em.fork() as unknown as Em;
}

export type AnyEm = CoreEntityManager | Em;
