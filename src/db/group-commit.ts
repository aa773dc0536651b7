import type { Pool } from 'pg';
import { executeTogether, isLastOfTransaction } from './prepared.ts';
import { loggedFailure, loggedRows, query, type Statement, type StatementEm, type StatementTxEm as TxEm } from './statement.ts';
import { GENERIC_PLANS } from '../sql/generic-plans.ts';
import { isStatementError } from './server-errors.ts';

/**
 * Group commit for transactions of one statement each (an in-memory run's whole execution,
 * src/runs/start-and-complete.ts; a run's acceptance, src/services/runs/accept-run.ts). While one group is on its way to Postgres, the transactions asked
 * for meanwhile wait, then go together as ONE transaction in ONE message (executeTogether in
 * src/db/prepared.ts): N of them cost one round trip, one commit and one WAL flush, and a row they
 * share (an account's wallet) is locked once for the group instead of once per transaction until its
 * commit. With nothing in flight a transaction goes at once, alone (the same one message), so a quiet
 * service adds no latency.
 *
 * A statement sent this way must do what it would do as a transaction of its own (fenced on the rows
 * it reads, nothing assumed about what ran before it). When a group fails (a statement raised, e.g.
 * wr_refuse; a deadlock), Postgres rolled all of it back, and each of its statements runs again as its
 * own transaction, so each caller gets its own result or error. Within a group statements go in the
 * order of their `order` key (a run's account, an acceptance's API key: the rows each kind shares with
 * its own kind), so groups of several processes lock shared rows in one order.
 *
 * A kind may gather instead (setGroupGather): a statement that finds it idle waits a few milliseconds
 * for others, so a steady trickle commits in groups too. Only for work nobody waits on synchronously.
 *
 * Each kind of statement (its name, or the `kind` its variants share) has its own group commit, so one
 * group of each kind is in flight at once: acceptances and run completions touch different rows (a
 * key's rate window and idempotency records; an account's wallet and its runs), and two groups of
 * different kinds keep two of Postgres's backends busy, where one line for both made each wait for the
 * other. Two groups of the same kind in flight would mostly queue on their shared rows and commit
 * smaller groups (measured: slower).
 * Embedded PGlite, or prepared statements turned off: each is its own transaction, as before.
 */

/** Transactions of one group at most (bounds the message and the time the group's locks are held). */
const MAX_GROUP = 64;

interface Waiting {
  em: TxEm;
  s: Statement;
  values: readonly unknown[];
  order: string;
  receipt: GroupReceipt | undefined;
  resolve: (rows: Record<string, unknown>[]) => void;
  reject: (error: unknown) => void;
}

/** What a caller of runInGroup may learn of how its statement was committed. */
export interface GroupReceipt {
  /** The kind's tail (GroupTail) ran in the statement's transaction and said it covered the group. */
  covered: boolean;
}

/**
 * Statements that a kind's groups carry before and after their own, in their transaction and message
 * (the embedded engine's admission lock before acceptances and its round after them:
 * src/engine/embedded/admission-in-acceptance.ts). Each must keep the group committable: nothing that
 * raises for a reason of its own, nothing that waits on a lock while the group's rows are held. What a
 * head takes is held while the group's statements run, waits for rows included, until the commit.
 */
export interface GroupTail {
  /** The tail for the group about to be sent (its statements' values, in order), or null for none this time. */
  next(group: readonly (readonly unknown[])[]): {
    /** Sent before the group's statements. */
    head?: readonly (readonly [Statement, readonly unknown[]])[];
    statements: readonly (readonly [Statement, readonly unknown[]])[];
    /** The results (pg results, in order) once committed, or null when they were not: whether the group is covered. */
    done(results: GroupResults | null): boolean;
    /** Its statements raise no error of their own: a group of one that fails failed for its statement. */
    raisesNothing?: boolean;
  } | null;
}

/**
 * A kind's group sent as ONE set-based statement instead of one statement per transaction: Postgres
 * starts and ends a statement's executor once for the whole group (for a statement of many CTEs that is
 * as much work as its rows). Its statement must write what the group's statements would, one after
 * another in the group's order, or raise (then the group runs again statement by statement, as any group
 * that fails). A member it leaves to run by itself is run as its own transaction once the group has
 * committed. Used for groups of two or more; a group of one sends its own statement.
 */
export interface GroupStatement {
  /**
   * The statement and its values for the group's values (in order; `keys`: each member's `order`), or
   * null: send the statements themselves.
   */
  combine(group: readonly (readonly unknown[])[], keys: readonly string[]): readonly [Statement, readonly unknown[]] | null;
  /** The rows each member's own statement would have returned, or 'alone': that member runs by itself after the commit. */
  split(rows: readonly Record<string, unknown>[], size: number): readonly (Record<string, unknown>[] | 'alone')[];
  /** Told when the statement raised for the group whose keys these are (the group then runs statement by statement). */
  failed?(error: unknown, keys: readonly string[]): void;
}

/**
 * A committed group's results: the head's, each member's own (a pg result; for a GroupStatement, `{ rows }`:
 * the rows its split gave the member, none for one left alone), the tail's.
 */
export interface GroupResults {
  head: readonly unknown[];
  group: readonly unknown[];
  tail: readonly unknown[];
}

class GroupCommit {
  #waiting: Waiting[] = [];
  #sending = false;
  /** The timer of a group gathering (see gatherMs), or null. */
  #gathering: ReturnType<typeof setTimeout> | null = null;
  tail: GroupTail | null = null;
  together: GroupStatement | null = null;
  /** How long a statement that finds its kind idle waits for others to join its group (ms); 0: it goes at once. */
  gatherMs = 0;

  /** `pool`: the ORM's connection pool, once created (undefined before). */
  constructor(readonly pool: () => Pool | undefined) {}

  run(w: Waiting): void {
    this.#waiting.push(w);
    if (this.#gathering) {
      if (this.#waiting.length >= MAX_GROUP) this.gathered();
    } else if (!this.#sending) {
      if (this.gatherMs > 0 && this.pool()) {
        this.#sending = true;
        this.#gathering = setTimeout(() => this.gathered(), this.gatherMs);
      } else this.#start();
    }
  }

  /** Ends a gathering group's wait: it goes now. */
  gathered(): void {
    if (!this.#gathering) return;
    clearTimeout(this.#gathering);
    this.#gathering = null;
    this.#sending = false;
    this.#start();
  }

  #start(): void {
    this.#send().catch((error: unknown) => {
      // Not expected (#sendGroup settles every caller itself); never leave a caller waiting.
      for (const left of this.#waiting.splice(0)) left.reject(error);
    });
  }

  async #send(): Promise<void> {
    this.#sending = true;
    try {
      while (this.#waiting.length > 0) {
        const group = this.#waiting.splice(0, MAX_GROUP).sort((a, b) => (a.order < b.order ? -1 : a.order > b.order ? 1 : 0));
        await this.#sendGroup(group);
      }
    } finally {
      this.#sending = false;
    }
  }

  async #sendGroup(group: Waiting[]): Promise<void> {
    const tail = this.pool() ? this.#nextTail(group) : null;
    const combined = group.length > 1 && this.pool() ? this.#combine(group) : null;
    let results: unknown[] | null = null;
    const head = tail?.head ?? [];
    const own: (readonly [Statement, readonly unknown[]])[] = combined ? [combined] : group.map((w) => [w.s, w.values] as const);
    try {
      results = await this.#together(head, own, tail?.statements ?? []);
    } catch (error) {
      try {
        tail?.done(null);
      } catch {
        // Nothing was committed; the callers below meet their own outcomes.
      }
      // A statement sent alone that raised (wr_refuse, a cap, a conflict) has met its own outcome. With
      // a tail, only a refusal of our own (SQLSTATE class WR) is surely the statement's: the tail's
      // statements (head included) never raise one; any other error runs the statement again alone,
      // below, unless the tail says its statements raise nothing.
      const [w] = group;
      const { code } = error as { code?: unknown };
      if (group.length === 1 && isStatementError(error) && (!tail || tail.raisesNothing === true || String(code).startsWith('WR'))) {
        await loggedFailure(w!.em, w!.s, w!.values, error).catch(w!.reject);
        return;
      }
      // Rolled back whole, or no connection (the server restarting): each runs again alone below and
      // meets its own outcome. A group whose COMMIT was lost with its connection is fenced out there.
      // The one statement's failure is logged as any failed query is: a fault of its own would
      // otherwise show only as groups sent twice.
      if (combined) this.#combinedFailed(group, combined, error);
      results = null;
    }
    if (results) {
      const mine = results.slice(head.length, head.length + own.length);
      const split = combined ? await this.#split(group, combined, mine[0]) : null;
      let covered = false;
      try {
        // The tail hears each member's own result: a GroupStatement's as the rows its split gave the member.
        const members = split ? split.map((rows) => ({ rows: rows === 'alone' ? [] : rows })) : mine;
        covered = tail ? tail.done({ head: results.slice(0, head.length), group: members, tail: results.slice(head.length + own.length) }) : false;
      } catch {
        // The group committed whatever its tail makes of its results; uncovered, its callers go on as without one.
      }
      if (combined) {
        if (split) await this.#answerSplit(group, split, covered);
        return;
      }
      for (const [i, w] of group.entries()) {
        if (w.receipt) w.receipt.covered = covered;
        loggedRows(w.em, w.s, w.values, mine[i]).then(w.resolve, w.reject);
      }
      return;
    }
    await Promise.all(group.map((w) => alone(w.em, w.s, w.values).then(w.resolve, w.reject)));
  }

  /** The group as the kind's one statement, or null (no GroupStatement, members of different statements, it declined, or it threw). */
  #combine(group: Waiting[]): readonly [Statement, readonly unknown[]] | null {
    if (!this.together || group.some((w) => w.s !== group[0]!.s)) return null;
    try {
      return this.together.combine(
        group.map((w) => w.values),
        group.map((w) => w.order),
      );
    } catch {
      return null;
    }
  }

  #combinedFailed(group: Waiting[], combined: readonly [Statement, readonly unknown[]], error: unknown): void {
    loggedFailure(group[0]!.em, combined[0], combined[1], error).catch(() => undefined);
    try {
      this.together?.failed?.(
        error,
        group.map((w) => w.order),
      );
    } catch {
      // Only advice for later groups.
    }
  }

  /** The committed combined statement's rows as each member's, or null (each caller then told why: not expected). */
  async #split(
    group: Waiting[],
    combined: readonly [Statement, readonly unknown[]],
    result: unknown,
  ): Promise<readonly (Record<string, unknown>[] | 'alone')[] | null> {
    try {
      const rows = await loggedRows(group[0]!.em, combined[0], combined[1], result);
      const split = this.together!.split(rows, group.length);
      if (split.length !== group.length) throw new Error(`${combined[0].name} answered for ${split.length} of ${group.length} statements`);
      return split;
    } catch (error) {
      // Committed, but its answer cannot be read: never leave a caller waiting.
      for (const w of group) w.reject(error);
      return null;
    }
  }

  /**
   * Each member's rows to its caller; a member left 'alone' runs as its own transaction now, before the
   * kind's next group (one group of a kind in flight, as ever). Its group's tail did not cover it: it
   * was written after.
   */
  async #answerSplit(group: Waiting[], split: readonly (Record<string, unknown>[] | 'alone')[], covered: boolean): Promise<void> {
    const later: Promise<void>[] = [];
    for (const [i, w] of group.entries()) {
      const rows = split[i]!;
      if (w.receipt) w.receipt.covered = rows !== 'alone' && covered;
      if (rows === 'alone') later.push(alone(w.em, w.s, w.values).then(w.resolve, w.reject));
      else w.resolve(rows);
    }
    await Promise.all(later);
  }

  /** The kind's tail for the next group; none when it throws (a tail must never cost a group its commit). */
  #nextTail(group: Waiting[]): ReturnType<GroupTail['next']> {
    try {
      return this.tail?.next(group.map((w) => w.values)) ?? null;
    } catch {
      return null;
    }
  }

  /**
   * `before` (the kind's head), the group, then `after` (its tail) in one message, or null without a
   * pool (statement by statement). A group of one goes the same way, straight to a pool connection: the
   * ORM's layers and its transaction cost more than the statement's own work on the service's side.
   */
  async #together(
    before: readonly (readonly [Statement, readonly unknown[]])[],
    group: readonly (readonly [Statement, readonly unknown[]])[],
    after: readonly (readonly [Statement, readonly unknown[]])[],
  ): Promise<unknown[] | null> {
    const pool = this.pool();
    if (!pool) return null;
    const text = ([s, values]: readonly [Statement, readonly unknown[]]) => [s.text, values] as const;
    return sendTogether(pool, [...before.map(text), ...group.map(text), ...after.map(text)]);
  }
}

/**
 * executeTogether on a connection of `pool`, after GENERIC_PLANS (src/sql/generic-plans.ts): the
 * statements run on their cached generic plans. A statement's error (isStatementError,
 * src/db/server-errors.ts) was rolled back and leaves the connection usable; an error that ends the
 * session, or a lost connection, does not go back to the pool.
 */
async function sendTogether(pool: Pool, statements: readonly (readonly [string, readonly unknown[]])[]): Promise<unknown[]> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    return (await executeTogether(client, [[GENERIC_PLANS.text, []], ...statements])).slice(1);
  } catch (error) {
    if (!isStatementError(error)) broken = error as Error;
    throw error;
  } finally {
    client.release(broken);
  }
}

/**
 * One statement as its own transaction, through the ORM, in one round trip on a server: a statement
 * marked as the last of its transaction (src/db/prepared.ts lastOfTransaction) brings its COMMIT and
 * its BEGIN travels with it; any other is sent outside a transaction (autocommit).
 */
function alone(em: TxEm, s: Statement, values: readonly unknown[]): Promise<Record<string, unknown>[]> {
  return isLastOfTransaction(s.text) ? em.transactional((tx) => query(tx, s, values)) : query(em, s, values);
}

/** Per ORM connection: its pool and a group commit per statement (by name). */
const connections = new WeakMap<object, { pool: () => Pool | undefined; kinds: Map<string, GroupCommit> }>();

/** Lets statements on this ORM connection be committed in groups, or together in one message, over the connections of `pool`. */
export function allowGroupCommit(connection: object, pool: () => Pool | undefined): void {
  connections.set(connection, { pool, kinds: new Map() });
}

/**
 * Several statements as ONE transaction sent in ONE message on a Postgres server: no round trip to
 * this process between them, so a lock an early statement takes (an advisory lock serialising a job)
 * is held only for the statements after it and the commit. Elsewhere one transaction, statement by
 * statement. Returns each statement's rows.
 */
export async function inOneMessage(em: TxEm, statements: readonly (readonly [Statement, readonly unknown[]])[]): Promise<Record<string, unknown>[][]> {
  const pool = connections.get(em.getConnection() as object)?.pool();
  if (!pool) {
    return em.transactional(async (tx) => {
      const out: Record<string, unknown>[][] = [];
      for (const [s, values] of statements) out.push(await query(tx, s, values));
      return out;
    });
  }
  const results = await sendTogether(pool, statements.map(([s, values]) => [s.text, values] as const));
  return Promise.all(statements.map(([s, values], i) => loggedRows(em, s, values, results[i])));
}

/**
 * Runs `s` with `values` as a transaction of its own, possibly committed together with others (above).
 * `order`: the key groups are sorted by (the account or API key whose shared rows it locks).
 * `receipt`: told whether the kind's tail covered the statement's group. `together`: the kind's groups
 * of two or more go as this one statement (GroupStatement).
 */
export function runInGroup<T = Record<string, unknown>>(
  em: TxEm,
  s: Statement,
  values: readonly unknown[],
  order: string,
  receipt?: GroupReceipt,
  together?: GroupStatement,
): Promise<T[]> {
  const c = connections.get(em.getConnection() as object);
  if (!c) return alone(em, s, values) as Promise<T[]>;
  const group = groupOf(c, s);
  if (together) group.together = together;
  return new Promise<Record<string, unknown>[]>((resolve, reject) => group.run({ em, s, values, order, receipt, resolve, reject })) as Promise<T[]>;
}

function groupOf(c: { pool: () => Pool | undefined; kinds: Map<string, GroupCommit> }, s: Statement): GroupCommit {
  const kind = s.kind ?? s.name;
  let group = c.kinds.get(kind);
  if (!group) c.kinds.set(kind, (group = new GroupCommit(c.pool)));
  return group;
}

/**
 * Gives the groups of statement `s` on this ORM connection a tail (one per kind: the last given).
 * Returns whether groups are committed on this connection at all (false: embedded PGlite, or prepared
 * statements off — every statement is its own transaction and no tail ever runs).
 */
export function setGroupTail(em: StatementEm, s: Statement, tail: GroupTail): boolean {
  const c = connections.get(em.getConnection() as object);
  if (!c) return false;
  groupOf(c, s).tail = tail;
  return true;
}

/**
 * Lets a statement of kind `s` that finds its kind idle wait up to `ms` for others to commit with it
 * (0: it goes at once, the default; a group waiting then goes now). For work nobody waits on
 * synchronously: see docs/round-trips.md#settlements-gather.
 */
export function setGroupGather(em: StatementEm, s: Statement, ms: number): void {
  const c = connections.get(em.getConnection() as object);
  if (!c) return;
  const group = groupOf(c, s);
  group.gatherMs = ms;
  if (ms <= 0) group.gathered();
}

/** Removes `tail` from the groups of `s`, if it is still theirs. */
export function clearGroupTail(em: StatementEm, s: Statement, tail: GroupTail): void {
  const group = connections.get(em.getConnection() as object)?.kinds.get(s.kind ?? s.name);
  if (group?.tail === tail) group.tail = null;
}
