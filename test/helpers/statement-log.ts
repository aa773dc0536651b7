import type { Orm } from '../../src/db/orm.ts';
import { observeQueryLog } from '../../src/db/query-log.ts';

/** A statement as the ORM logs it. */
export interface LoggedStatement {
  query: string;
  params?: readonly unknown[];
}

/**
 * The SQL statements the ORM logs while `fn` runs that `keep` accepts, seen through the ORM's query log
 * (src/db/query-log.ts) as bench/server.ts counts them. `keep` looks at them once `fn` is done, so it may depend on what `fn`
 * learned (a run's id, known only after a statement that mentions it may already have been sent).
 */
export async function statementsWhile<T>(
  orm: Orm,
  fn: () => Promise<T>,
  keep: (s: LoggedStatement) => boolean = () => true,
): Promise<{ result: T; sql: string[] }> {
  const seen: LoggedStatement[] = [];
  const stop = observeQueryLog(orm, (ctx) => seen.push({ query: ctx.query, params: ctx.params }));
  try {
    const result = await fn();
    return { result, sql: seen.filter(keep).map((s) => s.query) };
  } finally {
    stop();
  }
}
