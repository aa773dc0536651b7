import { createHash } from 'node:crypto';
import { CompiledQuery } from 'kysely';
import type { Pool, PoolClient } from 'pg';
import { pipelined, type Described, type Pipelined } from './pipeline.ts';

/**
 * Named prepared statements for the hot statements, on a Postgres server.
 *
 * MikroORM's `em.execute(sql, params)` inlines the parameters into the text, so every run's statements
 * reach Postgres as new text that is parsed, analysed and planned again (the engine's step write: 1709
 * tx/s as simple queries, 3125 prepared, pgbench on this machine). A statement marked with `prepared()`
 * is sent instead with `$n` placeholders under a name, once per connection; Postgres then skips parsing
 * and, once it settles on a generic plan, planning. Its results, errors and query log are those of
 * `em.execute` (same transaction context, same logger, same exception conversion).
 *
 * Parameters keep `em.execute`'s meaning: an array parameter is a comma-separated list of values (`in (?)`,
 * `array[?]`), so it becomes as many placeholders, and a plain object is its JSON text. Anything else
 * (dates, nested arrays, empty arrays, `??` identifiers) takes `em.execute`'s own path. PGlite runs in
 * process with nothing to gain, and keeps that path too.
 *
 * Names: each call site names its statement (`prepared('<name>', …)`), and that name is what
 * Postgres shows (pg_prepared_statements, the log: `execute <name>`), so it leads to the one file
 * that writes it (grep the name). A site whose text varies (fragments assembled per call, or an array
 * expanded into a list) is a `variant`: each text is named `<name>_<hash of the text>`, the same in
 * every process.
 */

/** Hot statement texts (with `?`) → their site's name and whether the text varies. */
const hot = new Map<string, { name: string; variant: boolean }>();
/** Converted texts (and src/sql statements) and their statement names; bounded, since array lengths vary the text. */
const names = new Map<string, string>();
/** Statement name → the converted text it was given to (a name is never reused for another text). */
const texts = new Map<string, string>();
const MAX_NAMES = 2000;

/**
 * Checks a statement's name as Postgres will hold it: SQL PREPARE folds an unquoted name to lower case
 * and cuts it at 63 bytes, while the protocol's Bind looks it up exactly as written, so a name must be
 * lower case, and short enough for what is appended to it (`_<hash>` for a variant, then `_b` or `_c`).
 */
function checkName(name: string, appended: number): void {
  if (!/^[a-z_][a-z0-9_]*$/.test(name) || name.length + appended > 63) {
    throw new Error(`statement name ${JSON.stringify(name)}: lower-case letters, digits and _ only, at most ${63 - appended} characters`);
  }
}

/** A constant `$n` statement of src/sql/ (src/db/statement.ts): prepared under its own name. */
export function nameStatement(text: string, name: string): void {
  checkName(name, 2);
  if (texts.has(name) && texts.get(name) !== text) throw new Error(`two statements are named ${name}`);
  names.set(text, name);
  texts.set(name, text);
}

/**
 * Marks a statement text (with `?` placeholders) as hot: sent as a named prepared statement called
 * `name`. `variant`: the site builds its text per call (see above).
 */
export function prepared(name: string, sql: string, opts: { variant?: boolean } = {}): string {
  checkName(name, 2 + 9);
  if (hot.size < MAX_NAMES && !hot.has(sql)) hot.set(sql, { name, variant: opts.variant === true });
  return sql;
}

/** What marks a statement text as the last of its transaction; an SQL comment, so the text runs anywhere. */
const COMMITS = '/* with commit */ ';
/** Marked variants by statement, so a settlement reuses one string instead of building it each time. */
const withCommits = new Map<string, string>();

/**
 * The variant of a hot statement that is the last of its transaction: on a Postgres server it is sent
 * together with the transaction's COMMIT, in one message, so the row locks it takes are released as soon
 * as the server has run it and flushed the commit, with no round trip to this process in between. The
 * wallet settlement needs this: every run of an account updates that account's one wallet row, so runs
 * settle one after another and each holds the row for as long as its commit takes to arrive.
 *
 * The caller's transaction must end right after the statement: the ORM's own COMMIT that follows is
 * answered here without reaching the server, and any other statement on that transaction is refused.
 * A statement that must not commit when its fence fails raises (`wr_refuse`, RefuseRoutine in the model)
 * instead of returning no rows: an error is what stops the COMMIT that travels with it; the ORM rolls back.
 * Elsewhere (PGlite, prepared statements turned off) it is the plain statement, committed as usual.
 */
export function withCommit(sql: string): string {
  let marked = withCommits.get(sql);
  if (marked === undefined) {
    const site = hot.get(sql);
    if (!site) throw new Error('withCommit takes a prepared() statement');
    marked = prepared(site.name, COMMITS + sql, { variant: site.variant });
    if (withCommits.size < MAX_NAMES) withCommits.set(sql, marked);
  }
  return marked;
}

/** withCommit for a src/sql statement's text (src/db/statement.ts): the same text, marked as the last of its transaction. */
export const lastOfTransaction = (text: string): string => COMMITS + text;

/** Whether a statement text was marked by lastOfTransaction or withCommit. */
export const isLastOfTransaction = (text: string): boolean => text.startsWith(COMMITS);

type Scalar = string | number | boolean | bigint | null;

/** `?` → `$n` with arrays expanded, or null when the statement must take the ORM's own path. */
export function numbered(sql: string, params: readonly unknown[]): { text: string; values: Scalar[]; expanded: boolean } | null {
  const values: Scalar[] = [];
  let expanded = false;
  let text = '';
  let pos = 0;
  let j = 0;
  for (;;) {
    const idx = sql.indexOf('?', pos);
    if (idx === -1) break;
    if (sql[idx + 1] === '?' || sql[idx - 1] === '\\' || j >= params.length) return null;
    const p = params[j++];
    const list = Array.isArray(p) ? p : [p];
    if (Array.isArray(p)) expanded = true;
    if (list.length === 0) return null;
    const marks: string[] = [];
    for (const v of list) {
      const s = scalar(v);
      if (s === undefined) return null;
      values.push(s);
      marks.push(`$${values.length}`);
    }
    text += sql.substring(pos, idx) + marks.join(', ');
    pos = idx + 1;
  }
  if (j !== params.length) return null;
  return { text: text + sql.substring(pos), values, expanded };
}

function scalar(v: unknown): Scalar | undefined {
  if (v === null || v === undefined) return null;
  switch (typeof v) {
    case 'string':
    case 'number':
    case 'boolean':
    case 'bigint':
      return v;
    case 'object':
      return Object.getPrototypeOf(v) === Object.prototype ? JSON.stringify(v) : undefined;
    default:
      return undefined;
  }
}

/** Names a converted text once: its site's name, or `<name>_<hash>` for a text that varies. */
function nameText(text: string, site: { name: string; variant: boolean }, expanded: boolean): void {
  if (names.has(text) || names.size >= MAX_NAMES) return;
  let name = site.name;
  // A withCommit text is prepared as `<name>_c` (executeAndCommit), apart from the plain statement.
  const key = (n: string) => (text.startsWith(COMMITS) ? `${n}_c` : n);
  const taken = texts.get(key(name));
  if (site.variant || expanded || (taken !== undefined && taken !== text)) {
    name = `${site.name}_${createHash('sha1').update(text).digest('hex').slice(0, 8)}`;
  }
  names.set(text, name);
  texts.set(key(name), text);
}

interface Executor {
  executeQuery(q: CompiledQuery): Promise<unknown>;
}

/** The parts of MikroORM's SQL connection used here (executeQuery logs, transformRawResult shapes rows). */
interface SqlConnection {
  execute(query: unknown, params?: unknown, method?: string, ctx?: unknown, loggerContext?: unknown): Promise<unknown>;
  executeQuery<T>(query: string, cb: () => Promise<T>, context?: object): Promise<T>;
  transformRawResult(res: unknown, method: string): unknown;
  getClient(): Executor;
}

/** Routes `prepared()` statements of this ORM (a Postgres server's) through numbered parameters. */
export function usePreparedStatements(orm: { em: { getConnection(): unknown } }): void {
  const connection = orm.em.getConnection() as unknown as SqlConnection;
  const execute = connection.execute.bind(connection);
  connection.execute = (query, params = [], method = 'all', ctx, loggerContext) => {
    const site = typeof query === 'string' && Array.isArray(params) ? hot.get(query) : undefined;
    const q = site ? numbered(query as string, params as unknown[]) : null;
    if (!site || !q) return execute(query, params, method, ctx, loggerContext);
    nameText(q.text, site, q.expanded);
    // A transaction's context is its Kysely transaction, which runs on the transaction's connection.
    const executor = (ctx as Executor | undefined) ?? connection.getClient();
    return connection.executeQuery(
      query as string,
      async () => connection.transformRawResult(await executor.executeQuery(CompiledQuery.raw(q.text, q.values)), method),
      { query, params, ...(loggerContext as object | undefined) },
    );
  };
}

type Query = (...args: unknown[]) => unknown;
interface QueryResult {
  command: string;
  rowCount: number | null;
  rows: unknown[];
  fields: unknown[];
}

/**
 * Gives the converted texts their names on every pooled connection: pg prepares a named statement the
 * first time a connection sees it and only binds it afterwards. `withCommit` statements are prepared
 * with SQL PREPARE instead, under names of their own, and sent with the COMMIT before one Sync
 * (src/db/pipeline.ts), which pg's own queries cannot do.
 *
 * A transaction's BEGIN is not sent on its own either: it is owed to the server and travels with the
 * transaction's first statement, in the same message (`begin` and `<name>_b` before one Sync for a named
 * statement, `begin; <text>` for one without parameters), so a transaction costs one round trip less.
 * A withCommit statement that is also its transaction's first is sent alone, as the implicit
 * transaction its Sync commits.
 * Nothing changes for the transaction but the time `now()` reads (the first statement's, not the
 * BEGIN's); a transaction that sends nothing before its COMMIT or ROLLBACK sends nothing at all.
 */
export function nameHotStatements(pool: Pool): void {
  pool.on('connect', (client: PoolClient) => {
    const query = client.query.bind(client) as Query;
    const preparedHere = new Set<string>();
    const described: Described = new Map();
    /** A BEGIN was asked for and not sent yet: it goes with the next statement. */
    let owedBegin = false;
    /**
     * The transaction on this connection already ended on the server with its last statement, so its
     * COMMIT or ROLLBACK is owed no reply: committed by a withCommit statement, or rolled back when
     * that statement, also the transaction's first, failed alone.
     */
    let ended: Ended | null = null;
    const end = (how: Ended) => (ended = how);
    const on: PreparedOn = { query, preparedHere, described };
    preparedOn.set(client, on);
    (client as unknown as { query: Query }).query = (config: unknown, values?: unknown, cb?: unknown) => {
      if (ended) {
        const was = ended;
        ended = null;
        // Nothing is left to roll back, so the ROLLBACK is answered here and the connection goes back to
        // the pool. After a commit it means the caller threw after its withCommit statement: what that
        // statement committed stays committed (it said so).
        if (config === 'rollback') return Promise.resolve(done('ROLLBACK'));
        if (was === 'committed') {
          if (config === 'commit') return Promise.resolve(done('COMMIT'));
          // A programming error: the statement marked withCommit was not the last of its transaction.
          return Promise.reject(
            new Error(`a statement followed a withCommit statement, whose transaction is already committed: ${String(config).slice(0, 80)}`),
          );
        }
      }
      const noValues = values === undefined || (Array.isArray(values) && values.length === 0);
      if (config === 'begin' && noValues && cb === undefined && !owedBegin) {
        owedBegin = true;
        return Promise.resolve(done('BEGIN'));
      }
      const begin = owedBegin;
      owedBegin = false;
      if (begin && (config === 'commit' || config === 'rollback') && noValues) return Promise.resolve(done(config === 'commit' ? 'COMMIT' : 'ROLLBACK'));
      if (typeof config === 'string' && Array.isArray(values) && values.length > 0 && names.has(config)) {
        const commit = config.startsWith(COMMITS);
        if (begin || commit) return executeWith(client, on, config, values, begin, commit, end);
        return query({ name: names.get(config)!, text: config, values }, cb);
      }
      if (begin) {
        if (typeof config === 'string' && noValues && cb === undefined) {
          return (query(`begin; ${config}`) as Promise<QueryResult[]>).then((results) => results[results.length - 1]!);
        }
        return (query('begin') as Promise<unknown>).then(() => query(config, values, cb));
      }
      return query(config, values, cb);
    };
    client.on('end', () => {
      preparedHere.clear();
      described.clear();
    });
  });
}

const done = (command: string): QueryResult => ({ command, rowCount: null, rows: [], fields: [] });

/** A pooled connection's own query function (before the wrapper above), the statements it prepared with SQL PREPARE and their row shapes. */
interface PreparedOn {
  query: Query;
  preparedHere: Set<string>;
  described: Described;
}

const preparedOn = new WeakMap<PoolClient, PreparedOn>();

/**
 * Prepares `text` as `name` with SQL PREPARE unless this connection did already (PREPARE is not undone
 * by a rollback, so once per connection), sending an owed BEGIN with it when `begin`. True when it sent
 * the BEGIN.
 */
async function prepareOnce(query: Query, preparedHere: Set<string>, name: string, text: string, begin = false): Promise<boolean> {
  if (preparedHere.has(name)) return false;
  await query(begin ? `begin; prepare ${name} as ${text}` : `prepare ${name} as ${text}`);
  preparedHere.add(name);
  return begin;
}

/**
 * Runs src/sql statements (`[text, values]`) one after another in ONE transaction sent as ONE message
 * on an idle pooled connection of this module's pool (src/db/pipeline.ts: bound and executed with the
 * extended protocol, committed at one Sync), and returns each statement's result. Each statement is
 * prepared on the connection first, once (SQL PREPARE, as `<name>_b`). On any error nothing of the
 * transaction was written, and the error is thrown.
 */
export async function executeTogether(client: PoolClient, statements: readonly (readonly [string, readonly unknown[]])[]): Promise<QueryResult[]> {
  const on = preparedOn.get(client);
  if (!on) throw new Error('executeTogether needs a connection of a pool given to nameHotStatements');
  const named: (readonly [string, readonly unknown[]])[] = [];
  for (const [text, values] of statements) {
    const name = `${names.get(text)!}_b`;
    if (!on.preparedHere.has(name)) await prepareOnce(on.query, on.preparedHere, name, text);
    named.push([name, values]);
  }
  return pipelined(client, on.query, named, on.described);
}

type Ended = 'committed' | 'rolled back';

/**
 * A named statement in one message with the owed BEGIN (`begin`, prepared as `<name>_b`) and/or the
 * COMMIT (`commit`, a withCommit text, prepared as `<name>_c`), before one Sync (src/db/pipeline.ts).
 * With both, the statement alone is the implicit transaction the Sync commits. `end` is told when the
 * transaction ended on the server with it: committed, or, alone, failed and rolled back by Postgres.
 */
async function executeWith(
  client: PoolClient,
  on: PreparedOn,
  text: string,
  values: unknown[],
  begin: boolean,
  commit: boolean,
  end: (how: Ended) => void,
): Promise<QueryResult> {
  const name = `${names.get(text)!}_${commit ? 'c' : 'b'}`;
  if (await prepareOnce(on.query, on.preparedHere, name, text, begin)) begin = false;
  const alone = begin && commit;
  const statements: Pipelined[] = alone ? [[name, values]] : [...(begin ? [{ text: 'begin' }] : []), [name, values], ...(commit ? [{ text: 'commit' }] : [])];
  try {
    const results = await pipelined(client, on.query, statements, on.described);
    if (commit) end('committed');
    return results[alone || !begin ? 0 : 1]!;
  } catch (error) {
    if (alone) end('rolled back');
    throw error;
  }
}
