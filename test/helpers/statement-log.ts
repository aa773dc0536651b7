import type { Orm } from '../../src/db/orm.ts';

/** A statement as the ORM logs it. */
export interface LoggedStatement {
  query: string;
  params?: unknown[];
}

/**
 * The SQL statements the ORM logs while `fn` runs (those `keep` accepts, read when each is logged), seen
 * through the ORM logger as bench/server.ts counts them.
 */
export async function statementsWhile<T>(orm: Orm, fn: () => Promise<T>, keep: (s: LoggedStatement) => boolean = () => true): Promise<{ result: T; sql: string[] }> {
  const logger = orm.config.getLogger() as unknown as { logQuery: (ctx: LoggedStatement) => void };
  const original = logger.logQuery;
  const sql: string[] = [];
  logger.logQuery = (ctx) => {
    if (keep(ctx)) sql.push(ctx.query);
    original.call(logger, ctx);
  };
  try {
    return { result: await fn(), sql };
  } finally {
    logger.logQuery = original;
  }
}
