import type { EntitySchema } from '@mikro-orm/core';
import type { CompiledQuery, QueryResult } from 'kysely';

/**
 * A SQL statement with a constant text and `$n` placeholders, under a stable name (the constants of
 * src/sql/*.ts; `statement` refuses a second text under one name). A value used twice is one
 * placeholder used twice; a list is one array parameter (`= any($1::uuid[])`, `unnest($2::text[])`),
 * so the text never varies. On a Postgres server it is a named prepared statement under that name
 * (what pg_stat_activity and the log show);
 * on PGlite it runs as it is.
 *
 * It names the entities (src/db/entities) whose tables it reads or writes, so that a test holds its
 * columns to theirs (test/unit/sql-entities.test.ts; docs/architecture.md#the-database-path).
 */
export interface Statement {
  readonly name: string;
  readonly text: string;
  /** The entities whose tables it reads or writes: every statement of src/sql names them, `[]` for one on no table (a lock, a setting). */
  readonly entities?: readonly EntitySchema[];
}

/** Statement name → its text: a name is given to one text only, as Postgres holds one statement per name on a connection. */
const texts = new Map<string, string>();

export function statement(name: string, text: string, entities?: readonly EntitySchema[]): Statement {
  // Postgres folds an unquoted name to lower case and cuts it at 63 bytes; the protocol looks it up as written.
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(name)) throw new Error(`statement name ${JSON.stringify(name)}: lower-case letters, digits and _, at most 63`);
  if (texts.has(name) && texts.get(name) !== text) throw new Error(`two statements are named ${name}`);
  texts.set(name, text);
  return { name, text, ...(entities && { entities }) };
}

/** A Kysely instance or transaction: what MikroORM's transaction context is. */
export interface StatementExecutor {
  executeQuery(q: CompiledQuery): Promise<QueryResult<unknown>>;
}

/** What `query` uses of the ORM's connection (src/db/statement-connection.ts gives it to both drivers' connections). */
interface StatementConnection {
  sendStatement<T>(s: Statement, params: readonly unknown[], transaction: StatementExecutor | undefined): Promise<T[]>;
}

/** What `query` needs of an entity manager (any of MikroORM's SQL ones). */
export interface StatementEm {
  getConnection(): unknown;
  getTransactionContext(): unknown;
}

/** A StatementEm that can also open a transaction. */
export interface StatementTxEm extends StatementEm {
  transactional<T>(cb: (tx: StatementEm) => Promise<T>): Promise<T>;
}

/** A StatementEm that says whether it is in a transaction, as MikroORM's do (a read shared between callers asks: src/catalog/pricing.ts). */
export interface TransactionAwareEm extends StatementEm {
  isInTransaction(): boolean;
}

interface ForkingOrm {
  em: { getConnection(): unknown; fork(): StatementTxEm };
}

type OutsideEm = StatementTxEm & TransactionAwareEm;

const outside = new WeakMap<object, OutsideEm>();

/**
 * Statements on the ORM's connection outside any transaction: what `query` uses of a fresh fork (its
 * connection, and no transaction context), without building the fork, an entity manager with its own
 * identity map that a plain read never uses (building one is a noticeable share of a run's CPU). A
 * transaction it opens is a fork's.
 */
export function outsideTransaction(orm: ForkingOrm): OutsideEm {
  let em = outside.get(orm);
  if (!em) {
    em = {
      getConnection: () => orm.em.getConnection(),
      getTransactionContext: () => undefined,
      isInTransaction: () => false,
      transactional: <T>(cb: (tx: StatementEm) => Promise<T>) => orm.em.fork().transactional(cb),
    };
    outside.set(orm, em);
  }
  return em;
}

/**
 * Runs `s` with `values` in the entity manager's transaction, if any, and returns its rows. Arrays are
 * passed as Postgres arrays; plain objects as their JSON text. Every statement is logged through the
 * ORM's query log (counts, slow-query log) however it is sent: src/db/statement-connection.ts.
 */
export async function query<T = Record<string, unknown>>(em: StatementEm, s: Statement, values: readonly unknown[]): Promise<T[]> {
  const params = values.map((v) => (v !== null && typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype ? JSON.stringify(v) : v));
  // A transaction's context is its Kysely transaction, which runs on the transaction's connection.
  return (em.getConnection() as StatementConnection).sendStatement<T>(s, params, em.getTransactionContext() as StatementExecutor | undefined);
}
