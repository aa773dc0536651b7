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

interface ResultBuilder extends PipelinedResult {
  addFields(fields: unknown[]): void;
  addCommandComplete(msg: unknown): void;
  parseRow(fields: unknown[]): Record<string, unknown>;
  addRow(row: Record<string, unknown>): void;
}

type Message = { fields: unknown[] };

/** The calls of pg's Connection used here (its published types lag behind its code). */
interface Wire {
  stream: { cork?(): void; uncork?(): void };
  parse(config: { text: string; name: string; types: number[] }): void;
  bind(config: { statement: string; portal: string; values: readonly unknown[] }): void;
  describe(config: { type: 'P'; name: string }): void;
  execute(config: { portal: string; rows: number }): void;
  sync(): void;
  sendCopyFail(message: string): void;
}

/** A statement of a pipeline: one prepared on the connection (its name and values), or a text without parameters (`begin`, `commit`). */
export type Pipelined = readonly [name: string, values: readonly unknown[]] | { readonly text: string };

/**
 * Statements sent with the extended protocol before ONE Sync, written to the socket at once: Bind,
 * Describe and Execute for each (a text without parameters is first parsed unnamed). Outside a
 * transaction block Postgres runs them as one implicit transaction: it commits at the Sync, or, at the
 * first error, skips the rest and rolls all of it back, so there is nothing to roll back afterwards. A
 * `begin` among them (or before them) makes them part of that transaction instead, which the Sync
 * leaves open.
 *
 * This is what `begin; execute …; execute …; commit` in one simple-query message did, without SQL
 * EXECUTE's cost per statement: no text to parse, no literals to read back into values, no BEGIN and
 * COMMIT statements of their own (docs/architecture.md#one-message-per-transaction). pg has no public
 * call for several statements before one Sync; it does take any object with `submit(connection)` in
 * place of a query (as pg-cursor does), and this is one. `send`: the connection's own query function.
 */
export function pipelined(client: PoolClient, send: (submittable: unknown) => unknown, statements: readonly Pipelined[]): Promise<PipelinedResult[]> {
  const p = new Pipeline(
    statements.map((s) => ('text' in s ? s : ([s[0], s[1].map(paramText)] as const))),
    client,
  );
  send(p);
  return p.done;
}

class Pipeline {
  readonly done: Promise<PipelinedResult[]>;
  #resolve!: (results: PipelinedResult[]) => void;
  #reject!: (error: unknown) => void;
  readonly #results: PipelinedResult[] = [];
  #current: ResultBuilder | null = null;
  #error: unknown = null;
  readonly #types: { getTypeParser: PoolClient['getTypeParser'] };

  constructor(
    readonly statements: readonly (readonly [string, readonly (string | Buffer | null)[]] | { readonly text: string })[],
    client: PoolClient,
  ) {
    this.#types = { getTypeParser: client.getTypeParser.bind(client) };
    this.done = new Promise((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
  }

  /** Called by pg when the connection is free: every message of the transaction in one write. */
  submit(connection: Wire): null {
    const stream = connection.stream;
    stream.cork?.();
    try {
      for (const s of this.statements) {
        if ('text' in s) {
          connection.parse({ text: s.text, name: '', types: [] });
          connection.bind({ statement: '', portal: '', values: [] });
        } else connection.bind({ statement: s[0], portal: '', values: s[1] });
        connection.describe({ type: 'P', name: '' });
        connection.execute({ portal: '', rows: 0 });
      }
      connection.sync();
    } finally {
      stream.uncork?.();
    }
    return null;
  }

  #result(): ResultBuilder {
    return (this.#current ??= new PgResult(undefined, this.#types) as ResultBuilder);
  }

  handleRowDescription(msg: Message): void {
    this.#result().addFields(msg.fields);
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
    this.#reject(this.#error);
  }

  handleReadyForQuery(): void {
    if (this.#error) this.#reject(this.#error);
    else this.#resolve(this.#results);
  }

  handlePortalSuspended(): void {}

  handleCopyInResponse(connection: Wire): void {
    connection.sendCopyFail('not supported in a pipelined transaction');
  }

  handleCopyData(): void {}
}
