import { query, type Statement, type StatementEm } from './statement.ts';

/**
 * One set-based statement answering many callers (docs/round-trips.md#batches). A statement written
 * over arrays (`unnest($1::uuid[], …) with ordinality`) takes a single call as a batch of one; while
 * one execution is on its way to Postgres, the calls that arrive meanwhile wait and then go together as
 * the next execution. N calls then cost one round trip, one executor start and one commit, and rows
 * they share (an account's wallet, a key's rate window) are locked once per batch.
 *
 * The statement answers each call in rows carrying `ord`, the call's place in the arrays (from 1); a
 * call gets its own rows without `ord` (none when the statement wrote nothing for it). It must never
 * raise for one call's reason (a refusal is a row saying so): when an execution of several fails
 * (a deadlock, a lost connection), each call runs again alone and meets its own outcome.
 *
 * An execution outside a transaction is a transaction of its own (autocommit). A call made inside a
 * transaction runs at once, alone, in that transaction.
 */
export interface BatchSpec<Call> {
  statement: Statement;
  /** The statement's parameters for these calls, in order: one array per parameter, one element per call. */
  values(calls: readonly Call[]): unknown[];
  /** Calls with the same key never share an execution (one row that a statement cannot write twice); the later waits for the next. */
  apartKey?: (call: Call) => string | undefined;
  /** The key calls are ordered by within an execution: rows shared across processes are then locked in one order. */
  orderKey?: (call: Call) => string;
  /** How long a call that finds nothing in flight waits for others (ms). Only for work nobody awaits synchronously. */
  gatherMs?: number;
}

/** Calls of one execution at most (bounds the time its locks are held). */
const MAX_BATCH = 64;

type Rows = Record<string, unknown>[];

interface Waiting<Call> {
  call: Call;
  resolve: (rows: Rows) => void;
  reject: (error: unknown) => void;
}

/** The calls waiting on one connection (an ORM's, through `outsideTransaction`) and whether an execution is in flight. */
class Line<Call> {
  waiting: Waiting<Call>[] = [];
  busy = false;
}

export class Batch<Call> {
  readonly #lines = new WeakMap<object, Line<Call>>();

  constructor(readonly spec: BatchSpec<Call>) {}

  /** Runs `call` (in an execution with others, or alone in `em`'s transaction) and returns its rows. */
  run(em: StatementEm, call: Call): Promise<Rows> {
    if (em.getTransactionContext() !== undefined) return this.#execute(em, [call]).then((answers) => answers[0]);
    let line = this.#lines.get(em);
    if (!line) this.#lines.set(em, (line = new Line()));
    const waiting = line;
    return new Promise<Rows>((resolve, reject) => {
      waiting.waiting.push({ call, resolve, reject });
      if (waiting.busy) return;
      waiting.busy = true;
      const gather = this.spec.gatherMs ?? 0;
      if (gather > 0) setTimeout(() => void this.#drain(em, waiting), gather);
      else void this.#drain(em, waiting);
    });
  }

  /** Sends what waits, one execution at a time, until nothing does. */
  async #drain(em: StatementEm, line: Line<Call>): Promise<void> {
    try {
      while (line.waiting.length > 0) await this.#send(em, this.#take(line));
    } finally {
      line.busy = false;
    }
  }

  /** The next execution's calls: at most MAX_BATCH, none sharing an apart key, in the order key's order. */
  #take(line: Line<Call>): Waiting<Call>[] {
    const { apartKey, orderKey } = this.spec;
    const taken: Waiting<Call>[] = [];
    const left: Waiting<Call>[] = [];
    const keys = new Set<string>();
    for (const waiting of line.waiting) {
      const key = apartKey?.(waiting.call);
      if (taken.length >= MAX_BATCH || (key !== undefined && keys.has(key))) {
        left.push(waiting);
        continue;
      }
      if (key !== undefined) keys.add(key);
      taken.push(waiting);
    }
    line.waiting = left;
    if (orderKey) {
      const order = new Map(taken.map((waiting) => [waiting, orderKey(waiting.call)]));
      taken.sort((a, b) => (order.get(a)! < order.get(b)! ? -1 : order.get(a)! > order.get(b)! ? 1 : 0));
    }
    return taken;
  }

  async #send(em: StatementEm, batch: Waiting<Call>[]): Promise<void> {
    try {
      const answers = await this.#execute(
        em,
        batch.map((waiting) => waiting.call),
      );
      batch.forEach((waiting, i) => waiting.resolve(answers[i]));
    } catch (error) {
      if (batch.length === 1) {
        batch[0].reject(error);
        return;
      }
      // Rolled back whole: each call again alone, so each meets its own outcome.
      for (const waiting of batch) await this.#send(em, [waiting]);
    }
  }

  /** One execution for `calls`: each call's rows, in order. */
  async #execute(em: StatementEm, calls: readonly Call[]): Promise<Rows[]> {
    const rows = await query(em, this.spec.statement, this.spec.values(calls));
    const answers: Rows[] = calls.map(() => []);
    for (const { ord, ...own } of rows) {
      const answer = answers[Number(ord) - 1];
      if (!answer) throw new Error(`${this.spec.statement.name} answered for call ${String(ord)} of ${calls.length}`);
      answer.push(own);
    }
    return answers;
  }
}
