import type { PoolClient } from 'pg';
// @ts-expect-error pg/lib/result has no type declarations
import PgResult from 'pg/lib/result.js';
import { paramText } from './param-text.ts';

/** A statement's result as pg's own Query gives it. */
export interface PipelinedResult {
  command: string;
  rowCount: number | null;
  rows: Record<string, unknown>[];
  fields: unknown[];
}

/** pg's Result (pg/lib/result.js), with the fields addFields sets. */
interface ResultBuilder extends PipelinedResult {
  _parsers: unknown;
  _prebuiltEmptyResultObject: unknown;
  addFields(fields: unknown[]): void;
  addCommandComplete(msg: unknown): void;
  parseRow(fields: unknown[]): Record<string, unknown>;
  addRow(row: Record<string, unknown>): void;
}

type Message = { fields: unknown[] };

/** Where type parsers come from: a connection's own (pg's `types` option can differ per client). */
type TypeParsers = { getTypeParser: PoolClient['getTypeParser'] };

/**
 * A statement's row shape as pg's Result.addFields makes it from a RowDescription: the fields, a type
 * parser per field (the connection's) and the empty row each row starts from. Made once per described
 * statement and given to each of its results, where addFields would look every parser up again.
 */
export interface RowShape {
  readonly fields: unknown[];
  readonly parsers: unknown;
  readonly emptyRow: unknown;
}

export function rowShape(fields: unknown[], types: TypeParsers): RowShape {
  const r = new PgResult(undefined, types) as ResultBuilder;
  r.addFields(fields);
  return { fields: r.fields, parsers: r._parsers, emptyRow: r._prebuiltEmptyResultObject };
}

/**
 * A pg Result for rows of `shape`, or for rows not described yet. Only read from afterwards (parseRow
 * copies the empty row), so one shape serves every result; test/db/pipeline.test.ts checks it sets
 * what addFields sets.
 */
export function shapedResult(types: TypeParsers, shape?: RowShape): ResultBuilder {
  const r = new PgResult(undefined, types) as ResultBuilder;
  if (shape) shapeResult(r, shape);
  return r;
}

function shapeResult(r: ResultBuilder, shape: RowShape): void {
  r.fields = shape.fields;
  r._parsers = shape.parsers;
  r._prebuiltEmptyResultObject = shape.emptyRow;
}

/** The calls of pg's Connection used here (its published types lag behind its code). */
interface Wire {
  stream: { cork?(): void; uncork?(): void; destroy(error: Error): void };
  parse(config: { text: string; name: string; types: number[] }): void;
  bind(config: { statement: string; portal: string; values: readonly unknown[] }): void;
  describe(config: { type: 'P'; name: string }): void;
  execute(config: { portal: string; rows: number }): void;
  sync(): void;
  sendCopyFail(message: string): void;
}

/**
 * The row shape (RowDescription fields, and their type parsers) of each statement prepared on one
 * connection, by name, as Postgres last described it there. A statement found here is executed without
 * a Describe: Postgres sends no RowDescription and its rows are read with this shape, which saves
 * building, sending and parsing the description, and looking up its parsers, on every execution (the
 * shape of a prepared statement cannot change: Postgres refuses to run one whose result type changed).
 * Per connection, as its parsers are. Forget it with the connection.
 */
export type Described = Map<string, RowShape>;

/** A statement of a pipeline: one prepared on the connection (its name and values), or a text without parameters (`begin`, `commit`). */
export type Pipelined = readonly [name: string, values: readonly unknown[]] | { readonly text: string };

/**
 * Statements sent with the extended protocol before ONE Sync, written to the socket at once: Bind,
 * Describe and Execute for each (a text without parameters is first parsed unnamed). Outside a
 * transaction block Postgres runs them as one implicit transaction: it commits at the Sync, or, at the
 * first error it reports (an error with a `severity`), skips the rest and rolls all of it back, so
 * there is nothing to roll back afterwards. Any other error (the connection lost, a result that could
 * not be read) leaves the outcome unknown, as it would for pg's own queries. A `begin` among them (or
 * before them) makes them part of that transaction instead, which the Sync leaves open.
 *
 * This is what `begin; execute …; execute …; commit` in one simple-query message did, without SQL
 * EXECUTE's cost per statement: no text to parse, no literals to read back into values, no BEGIN and
 * COMMIT statements of their own (docs/round-trips.md#one-message-per-transaction). pg has no public
 * call for several statements before one Sync; it does take any object with `submit(connection)` in
 * place of a query (as pg-cursor does), and this is one. `send`: the connection's own query function.
 */
export function pipelined(
  client: PoolClient,
  send: (submittable: unknown) => unknown,
  statements: readonly Pipelined[],
  described?: Described,
): Promise<PipelinedResult[]> {
  const p = new Pipeline(
    statements.map((s) => ('text' in s ? s : ([s[0], s[1].map(paramText)] as const))),
    client,
    described,
  );
  try {
    send(p);
  } catch (error) {
    p.handleError(error);
  }
  return p.done;
}

class Pipeline {
  readonly done: Promise<PipelinedResult[]>;
  #resolve!: (results: PipelinedResult[]) => void;
  #reject!: (error: unknown) => void;
  readonly #results: PipelinedResult[] = [];
  #current: ResultBuilder | null = null;
  #error: unknown = null;
  #settled = false;
  readonly #types: TypeParsers;

  /** Per statement: the shape its rows are read with, not asked of Postgres (Described). */
  readonly #known: (RowShape | undefined)[];

  constructor(
    readonly statements: readonly (readonly [string, readonly (string | Buffer | null)[]] | { readonly text: string })[],
    client: PoolClient,
    readonly described?: Described,
  ) {
    this.#known = statements.map((s) => ('text' in s ? undefined : described?.get(s[0])));
    this.#types = { getTypeParser: client.getTypeParser.bind(client) };
    this.done = new Promise((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
  }

  /**
   * Called by pg when the connection is free: every message of the transaction in one write. pg catches
   * nothing this throws, so nothing is thrown: should building a message fail once part of the pipeline
   * is buffered, that part must never reach the server (a Sync after it would commit it, and without one
   * the server would hold its locks and wait), so the connection is closed unsent instead. pg then
   * answers this pipeline, and whatever waits for the connection, with the error, and the pool drops it.
   */
  submit(connection: Wire): null {
    const stream = connection.stream;
    stream.cork?.();
    try {
      for (const [i, s] of this.statements.entries()) {
        if ('text' in s) {
          connection.parse({ text: s.text, name: '', types: [] });
          connection.bind({ statement: '', portal: '', values: [] });
        } else connection.bind({ statement: s[0], portal: '', values: s[1] });
        if (!this.#known[i]) connection.describe({ type: 'P', name: '' });
        connection.execute({ portal: '', rows: 0 });
      }
      connection.sync();
    } catch (error) {
      this.#error ??= error;
      stream.destroy(error instanceof Error ? error : new Error(String(error)));
    } finally {
      // A destroyed stream writes nothing of what was corked.
      stream.uncork?.();
    }
    return null;
  }

  /** Set by pg when the pool's `query_timeout` is on: told the outcome, it clears its timer. */
  callback?: (error: unknown, results?: unknown) => void;

  #settle(error: unknown, results?: PipelinedResult[]): void {
    if (this.#settled) return;
    this.#settled = true;
    if (error) this.#reject(error);
    else this.#resolve(results!);
    this.callback?.(error ?? null, results);
  }

  /** The result of the statement answering now (the statements answer in order, one CommandComplete each). */
  #result(): ResultBuilder {
    if (this.#current) return this.#current;
    return (this.#current = shapedResult(this.#types, this.#known[this.#results.length]));
  }

  handleRowDescription(msg: Message): void {
    const shape = rowShape(msg.fields, this.#types);
    shapeResult(this.#result(), shape);
    const s = this.statements[this.#results.length];
    if (s && !('text' in s)) this.described?.set(s[0], shape);
  }

  handleDataRow(msg: Message): void {
    if (this.#error) return;
    try {
      const r = this.#result();
      r.addRow(r.parseRow(msg.fields));
    } catch (error) {
      // A type parser threw: answered once the transaction is over, as pg's Query does.
      this.#error = error;
    }
  }

  handleCommandComplete(msg: unknown): void {
    const r = this.#result();
    r.addCommandComplete(msg);
    this.#results.push(r);
    this.#current = null;
  }

  handleEmptyQuery(): void {
    this.#results.push(this.#result());
    this.#current = null;
  }

  /** An error from Postgres (the rest was skipped and the transaction rolled back) or from the connection. */
  handleError(error: unknown): void {
    this.#error ??= error;
    this.#settle(this.#error);
  }

  handleReadyForQuery(): void {
    this.#settle(this.#error, this.#results);
  }

  handlePortalSuspended(): void {}

  handleCopyInResponse(connection: Wire): void {
    connection.sendCopyFail('not supported in a pipelined transaction');
  }

  handleCopyData(): void {}
}
