import { type Configuration, type Constructor, EntityManagerType } from '@mikro-orm/core';
import { AbstractSqlDriver, EntityManager, MikroORM, PostgreSqlConnection, PostgreSqlPlatform } from '@mikro-orm/postgresql';
import type { Pool, QueryConfig, QueryResult } from 'pg';
import { isStatementError } from './server-errors.ts';
import type { Statement, StatementExecutor } from './statement.ts';
import { withStatements } from './statement-connection.ts';

/**
 * A Postgres server as MikroORM's own extension points make it (subclasses of its connection and
 * driver), for the statements of src/sql: outside a transaction they go straight to the pg pool, as
 * named prepared statements.
 */

/** The stock Postgres connection with src/db/statement.ts's statements, sent through the pool once told of it. */
export class ServerConnection extends withStatements(PostgreSqlConnection) {
  #pool: (() => Pool | undefined) | undefined;
  #named = false;

  /**
   * Statements outside a transaction go straight to `pool` (pg's public client API), under their names
   * when `named`: Postgres then parses each once per connection, and the name is what pg_stat_statements
   * and the log show. src/db/orm.ts calls it with the pool MikroORM created.
   */
  sendThroughPool(pool: () => Pool | undefined, named: boolean): void {
    this.#pool = pool;
    this.#named = named;
  }

  override sendStatement<T>(s: Statement, params: readonly unknown[], transaction: StatementExecutor | undefined): Promise<T[]> {
    const pool = transaction === undefined ? this.#pool?.() : undefined;
    if (!pool) return super.sendStatement(s, params, transaction);
    const values = params as unknown[];
    const config = this.#named ? { name: s.name, text: s.text, values } : { text: s.text, values };
    return this.logStatement(s, params, async () => (await onPooledClient(pool, config)).rows as T[]);
  }
}

/** The stock Postgres driver (its platform, entity manager and ORM class) on ServerConnection. */
export class ServerDriver extends AbstractSqlDriver<ServerConnection> {
  declare [EntityManagerType]: EntityManager<this>;

  constructor(config: Configuration) {
    super(config, new PostgreSqlPlatform(), ServerConnection, ['kysely', 'pg']);
  }

  override createEntityManager(useContext?: boolean): this[typeof EntityManagerType] {
    const EntityManagerClass = this.config.get('entityManager', EntityManager);
    return new EntityManagerClass(this.config, this, this.metadata, useContext);
  }

  override getORMClass(): Constructor<MikroORM> {
    return MikroORM;
  }
}

/**
 * One query on a pooled client. Not `pool.query`: it discards the client on any error, and a
 * statement's own error (a refusal, a conflict) leaves the session usable, its prepared statements with it.
 */
async function onPooledClient(pool: Pool, config: QueryConfig): Promise<QueryResult> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    return await client.query(config);
  } catch (error) {
    if (!isStatementError(error)) broken = error as Error;
    throw error;
  } finally {
    client.release(broken);
  }
}
