import type { LogContext } from '@mikro-orm/core';
import type { AbstractSqlConnection } from '@mikro-orm/postgresql';
import { CompiledQuery } from 'kysely';
import type { Statement, StatementExecutor } from './statement.ts';

/**
 * Wraps every statement of a connection: `send` runs it (and logs it); what the interceptor returns is
 * the statement's result. Tests hold, count or interrupt statements through it.
 */
export type StatementInterceptor = (sql: string, send: () => Promise<unknown>, params: readonly unknown[]) => Promise<unknown>;

// A mixin's base must be typed as a constructor taking `any[]` (TypeScript's rule for mixins).
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type SqlConnectionClass = abstract new (...args: any[]) => AbstractSqlConnection;

/**
 * A MikroORM SQL connection class (PGlite's, the Postgres server's) with the statements of src/sql
 * (src/db/statement.ts). MikroORM logs a statement (its query log, counts, the slow-query log) in the
 * connection's protected `executeQuery`, where the ORM's own statements pass too; a subclass may call
 * it, so the statements of src/sql are sent from here and logged as the ORM's are.
 */
export function withStatements<Base extends SqlConnectionClass>(base: Base) {
  abstract class StatementConnection extends base {
    #interceptor: StatementInterceptor | undefined;

    /**
     * Sends `s` with `params` on `transaction` (its Kysely transaction: the transaction's own
     * connection) or on the connection's pool, and returns its rows.
     */
    sendStatement<T>(s: Statement, params: readonly unknown[], transaction: StatementExecutor | undefined): Promise<T[]> {
      const executor = transaction ?? this.getClient();
      return this.logStatement(s, params, async () => (await executor.executeQuery(CompiledQuery.raw(s.text, params as unknown[]))).rows as T[]);
    }

    /**
     * Every statement of this connection, the ORM's and src/sql's, passes through `interceptor` from
     * now on (none: undefined). One at a time: a second replaces the first.
     */
    interceptStatements(interceptor: StatementInterceptor | undefined): void {
      this.#interceptor = interceptor;
    }

    /** Logs `send`, which sends `s`, as the ORM logs its own statements. */
    protected logStatement<T>(s: Statement, params: readonly unknown[], send: () => Promise<T[]>): Promise<T[]> {
      return this.executeQuery(s.text, send, { query: s.text, params });
    }

    protected override executeQuery<T>(query: string, cb: () => Promise<T>, context?: LogContext): Promise<T> {
      const interceptor = this.#interceptor;
      if (!interceptor) return super.executeQuery(query, cb, context);
      return interceptor(query, () => super.executeQuery(query, cb, context), context?.params ?? []) as Promise<T>;
    }
  }
  return StatementConnection;
}

/**
 * Every statement of `orm`'s connection (one opened by src/db/orm.ts) passes through `interceptor` until
 * the function it returns is called.
 */
export function interceptStatements(orm: { em: { getConnection(): unknown } }, interceptor: StatementInterceptor): () => void {
  const connection = orm.em.getConnection() as { interceptStatements?: (interceptor: StatementInterceptor | undefined) => void };
  const intercept = connection.interceptStatements?.bind(connection);
  if (!intercept) throw new Error('not a connection of src/db/orm.ts');
  intercept(interceptor);
  return () => intercept(undefined);
}
