import { DefaultLogger, type LogContext } from '@mikro-orm/core';

/** A statement as the ORM's query log has it: its text, its parameters, how long it took. */
export type LoggedStatement = { query: string } & LogContext;

/**
 * MikroORM's default logger (given through its public `loggerFactory` option by src/db/orm.ts) that also
 * tells observers of every statement the query log records: the ORM's own, src/sql's, and the BEGIN,
 * COMMIT and ROLLBACK of transactions. Benches count statements by it, tests read them.
 */
export class ObservedQueryLog extends DefaultLogger {
  readonly #observers = new Set<(statement: LoggedStatement) => void>();

  override logQuery(context: LoggedStatement): void {
    super.logQuery(context);
    // The slow-query log is this logger too when no other is configured: a statement is told once.
    if (context.namespace === 'slow-query') return;
    for (const observer of this.#observers) observer(context);
  }

  /** Calls `observer` with each statement logged from now on, until the function it returns is called. */
  observe(observer: (statement: LoggedStatement) => void): () => void {
    this.#observers.add(observer);
    return () => this.#observers.delete(observer);
  }
}

/** Calls `observer` with each statement `orm` (one opened by src/db/orm.ts) logs, until the function it returns is called. */
export function observeQueryLog(orm: { config: { getLogger(): unknown } }, observer: (statement: LoggedStatement) => void): () => void {
  const logger = orm.config.getLogger();
  if (!(logger instanceof ObservedQueryLog)) throw new Error('not an ORM of src/db/orm.ts');
  return logger.observe(observer);
}
