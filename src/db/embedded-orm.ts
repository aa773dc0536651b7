import { type Configuration, type Constructor, EntityManagerType, type LogContext } from '@mikro-orm/core';
import { AbstractSqlDriver, BasePostgreSqlEntityManager, MikroORM as PgliteMikroORM, PgliteConnection, PglitePlatform } from '@mikro-orm/pglite';
import type { DataDirLock } from './data-dir-lock.ts';
import { withStatements } from './statement-connection.ts';
import { pgliteOpened, pgliteStatement } from '../observability/deployment-metrics.ts';

/**
 * Embedded PGlite as MikroORM's own extension points make it (subclasses of its connection, driver and
 * ORM), for what the embedded database needs beyond the stock driver: statements that let the event
 * loop breathe, the gauges of docs/operations.md, and the data directory's lock released on close.
 */

/**
 * PGlite answers a statement inside the event loop (WASM) without waiting on any I/O, so a chain of
 * awaited statements (the engine driving runs, each statement resolving the next one's turn) would keep
 * the loop to itself and starve HTTP requests and sockets. Every statement first lets pending I/O run.
 * `executeQuery` is where both the ORM's own statements and src/db/statement.ts's pass.
 */
export class EmbeddedConnection extends withStatements(PgliteConnection) {
  protected override async executeQuery<T>(query: string, cb: () => Promise<T>, context?: LogContext): Promise<T> {
    // Counted as the connection's pending requests (db_client_connection_* in docs/operations.md).
    pgliteStatement(1);
    try {
      await new Promise<void>((resolve) => setImmediate(resolve));
      return await super.executeQuery(query, cb, context);
    } finally {
      pgliteStatement(-1);
    }
  }
}

/** The stock PGlite driver (its platform, entity manager and ORM class) on EmbeddedConnection. */
export class EmbeddedDriver extends AbstractSqlDriver<EmbeddedConnection> {
  declare [EntityManagerType]: BasePostgreSqlEntityManager<this>;

  constructor(config: Configuration) {
    super(config, new PglitePlatform(), EmbeddedConnection, ['kysely', '@electric-sql/pglite']);
  }

  override createEntityManager(useContext?: boolean): this[typeof EntityManagerType] {
    const EntityManagerClass = this.config.get('entityManager', BasePostgreSqlEntityManager);
    return new EntityManagerClass(this.config, this, this.metadata, useContext);
  }

  override getORMClass(): Constructor<EmbeddedOrm> {
    return EmbeddedOrm;
  }
}

/** The ORM of an embedded database: one in-process connection while open (db_client_connection_max), its data directory locked. */
export class EmbeddedOrm extends PgliteMikroORM {
  /** The data directory's lock (src/db/data-dir-lock.ts), released once the database is closed; none in memory. */
  private dataDirLock?: DataDirLock;
  #open = true;

  /** Opens the database in `options.dbName` on EmbeddedDriver; `lock` is released once it is closed. */
  static async open(options: Parameters<typeof PgliteMikroORM.init>[0], lock?: DataDirLock): Promise<EmbeddedOrm> {
    // MikroORM.init constructs `this`, so the ORM it returns is an EmbeddedOrm.
    const orm = (await EmbeddedOrm.init({ ...options, driver: EmbeddedDriver } as typeof options)) as unknown as EmbeddedOrm;
    orm.dataDirLock = lock;
    pgliteOpened(1);
    return orm;
  }

  override async close(force?: boolean): Promise<void> {
    try {
      await super.close(force);
    } finally {
      if (this.#open) {
        this.#open = false;
        pgliteOpened(-1);
        this.dataDirLock?.release();
      }
    }
  }
}
