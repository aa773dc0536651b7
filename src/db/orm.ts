import { mkdirSync } from 'node:fs';
import { resolve } from 'node:path';
import type { EntityManager as CoreEntityManager, LoggerOptions } from '@mikro-orm/core';
import { Migrator } from '@mikro-orm/migrations';
import { MikroORM as PgMikroORM, type EntityManager as PgEntityManager } from '@mikro-orm/postgresql';
import pg, { type Pool, type PoolClient } from 'pg';
import { lockDataDir, type DataDirLock } from './data-dir-lock.ts';
import { entities } from './entities/index.ts';
import { routines } from './entities/routines.ts';
import { queueRoutines } from './entities/queue-routines.ts';
import { migrations } from './migrations/index.ts';
import { ObservedQueryLog } from './query-log.ts';
import { ServerConnection, ServerDriver } from './server-orm.ts';
import { watchPool } from '../observability/deployment-metrics.ts';

/**
 * Postgres everywhere: a real server when DATABASE_URL is set, embedded PGlite otherwise. Both speak
 * the same SQL, so services write plain Postgres and never branch on the driver.
 */

export type Orm = PgMikroORM;
/** Both drivers' entity managers share the SQL API; services type against this one. */
export type Em = PgEntityManager;

export interface DbOptions {
  databaseUrl?: string;
  /** src/sql statements as named prepared statements on a server (default true; src/db/server-orm.ts). */
  preparedStatements?: boolean;
  /** Directory of the embedded database; `memory://` keeps it in memory (tests). */
  dataDir?: string;
  /** Who opens a PGlite data directory, recorded in its lock (src/db/data-dir-lock.ts). */
  lockAs?: { role: string; port?: number };
  debug?: boolean;
}

export function describeDb(opts: DbOptions): string {
  if (opts.databaseUrl) return opts.databaseUrl.replace(/\/\/([^:@/]+):[^@/]*@/, '//$1:***@');
  return `pglite:${opts.dataDir ?? 'memory://'}`;
}

export async function openOrm(opts: DbOptions): Promise<Orm> {
  const common = {
    entities,
    routines: [...routines, ...queueRoutines],
    extensions: [Migrator],
    migrations: { migrationsList: migrations, transactional: true, allOrNothing: true, snapshot: false, silent: true },
    debug: opts.debug ?? false,
    loggerFactory: (options: LoggerOptions) => new ObservedQueryLog(options),
    // Services fork their own entity managers; touching the global one is a bug we want loud.
    allowGlobalContext: false,
    forceUtcTimezone: true,
  };
  if (opts.databaseUrl) {
    let pool: Pool | undefined;
    const orm = (await PgMikroORM.init({
      ...common,
      clientUrl: opts.databaseUrl,
      driver: ServerDriver,
      pool: { min: 0, max: 10 },
      driverOptions: {
        onPoolCreated: (created: Pool) => {
          pool = created;
          reclaimDeadClients(created);
          watchPool(created);
        },
      },
    })) as unknown as Orm;
    const connection = orm.em.getConnection();
    if (connection instanceof ServerConnection) connection.sendThroughPool(() => pool, opts.preparedStatements !== false);
    return orm;
  }
  let dataDir = opts.dataDir ?? 'memory://';
  let lock: DataDirLock | undefined;
  if (!dataDir.startsWith('memory:')) {
    const root = resolve(dataDir);
    dataDir = resolve(root, 'pg');
    mkdirSync(dataDir, { recursive: true });
    lock = lockDataDir(root, opts.lockAs ?? { role: process.argv.slice(1).join(' ') || 'node' });
  }
  try {
    // PGlite (its driver and its WebAssembly Postgres) loads only when there is no DATABASE_URL.
    const { EmbeddedOrm } = await import('./embedded-orm.ts');
    const orm = await EmbeddedOrm.open({ ...common, dbName: dataDir }, lock);
    // Both drivers share the SQL entity manager API; services only use that surface.
    return orm as unknown as Orm;
  } catch (err) {
    lock?.release();
    throw err;
  }
}

/**
 * Gives the pool back the slot of a connection that died while checked out. Kysely (under MikroORM)
 * releases a transaction's connection only after its COMMIT or ROLLBACK succeeds, and not at all when
 * BEGIN fails; on a connection cut by a server restart or crash neither can succeed, so pg-pool counts
 * that client as in use for ever. After `max` such transactions every query waits for a connection
 * for ever: the process is up but answers nothing, /readyz included (test/hardening/faults.test.ts).
 *
 * When a checked-out client's connection ends, it is released with an error (so the pool discards it)
 * unless its holder released it in the meantime. The release is deferred by a macrotask: a holder that
 * does release (a plain query's connection provider) does so from the failed query's promise chain,
 * before that.
 */
export function reclaimDeadClients(pool: Pool): void {
  const checkedOut = new Set<PoolClient>();
  pool.on('acquire', (client) => checkedOut.add(client));
  pool.on('release', (_err: Error | undefined, client: PoolClient) => checkedOut.delete(client));
  pool.on('remove', (client) => checkedOut.delete(client));
  pool.on('connect', (client) => {
    client.once('end', () => {
      setImmediate(() => {
        const held = client;
        if (!checkedOut.delete(held)) return;
        try {
          held.release(new Error('the database connection ended while checked out'));
        } catch {
          // released by its holder after all
        }
      });
    });
  });
}

/** Fixed key of the migration lock; the service's other advisory locks use other keys. */
export const MIGRATION_LOCK_KEY = 727_100;

/**
 * Applies pending migrations; a no-op on an up-to-date database. Returns the names applied.
 *
 * On a Postgres server any number of processes (API processes, workers) may start at once on an empty
 * database, so the migrator runs under a session advisory lock held by a connection of its own: one
 * process migrates, the others wait and then find nothing left to apply. PGlite is one process
 * (src/db/data-dir-lock.ts) and needs no lock. See docs/operations.md.
 */
export async function migrate(orm: Orm): Promise<string[]> {
  if (await allApplied(orm)) return [];
  if (!(orm.em.getDriver() instanceof ServerDriver)) return migrateNow(orm);
  const lock = new pg.Client({ connectionString: orm.config.get('clientUrl') });
  // A connection that fails while waiting rejects the query below; the event must not crash the process.
  lock.on('error', () => undefined);
  await lock.connect();
  try {
    await lock.query('select pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
    return await migrateNow(orm);
  } finally {
    // Ending the session releases its lock, also when the unlock cannot be sent.
    await lock.query('select pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]).catch(() => undefined);
    await lock.end().catch(() => undefined);
  }
}

/**
 * The check of a start on a migrated database: one read of the migrations table on the pool, no lock
 * and no connection of its own. Migrations commit all together (`allOrNothing`), so finding every name
 * means none is half applied. A table not there yet, or any other failure, leaves it to the migrator.
 */
async function allApplied(orm: Orm): Promise<boolean> {
  const table = orm.config.get('migrations').tableName ?? 'mikro_orm_migrations';
  try {
    const rows = await orm.em.getConnection().execute<{ name: string }[]>(`select name from ${table}`);
    const applied = new Set(rows.map((r) => r.name));
    return migrations.every((m) => applied.has(m.name));
  } catch {
    return false;
  }
}

async function migrateNow(orm: Orm): Promise<string[]> {
  const applied = await orm.migrator.up();
  return applied.map((m) => m.name);
}

export function em(orm: Orm): Em {
  return orm.em.fork();
}

export type AnyEm = CoreEntityManager | Em;
