import type { Orm } from '../../src/db/orm.ts';

/** A statement as the ORM logs it. */
export interface LoggedStatement {
  query: string;
  params?: unknown[];
}

/**
 * The SQL statements the ORM logs while `fn` runs that `keep` accepts, seen through the ORM logger as
 * bench/server.ts counts them. `keep` looks at them once `fn` is done, so it may depend on what `fn`
 * learned (a run's id, known only after a statement that mentions it may already have been sent).
 */
export async function statementsWhile<T>(
  orm: Orm,
  fn: () => Promise<T>,
  keep: (s: LoggedStatement) => boolean = () => true,
): Promise<{ result: T; sql: string[] }> {
  const logger = orm.config.getLogger() as unknown as { logQuery: (ctx: LoggedStatement) => void };
  const original = logger.logQuery;
  const seen: LoggedStatement[] = [];
  logger.logQuery = (ctx) => {
    seen.push({ query: ctx.query, params: ctx.params });
    original.call(logger, ctx);
  };
  try {
    const result = await fn();
    return { result, sql: seen.filter(keep).map((s) => s.query) };
  } finally {
    logger.logQuery = original;
  }
}
