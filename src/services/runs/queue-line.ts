import type { Em } from '../../db/orm.ts';
import { fork, type RunsDeps } from '../../runs/deps.ts';
import { query, statement } from '../../db/statement.ts';

/**
 * The line of queued runs, with places that are exact and cheap at any depth (docs/design/rules.md,
 * "Queue and capacity"; docs/scaling.md).
 *
 * Every queued run gets a place number, `runs.queue_seq`, soon after it is accepted: 1, 2, 3, … in
 * acceptance order, without gaps, never reused. The line is ordered by (queue_seq, then runs not
 * numbered yet by acceptance time and id). The place of a numbered run r is then the number of queued
 * runs numbered from the head H (the lowest number still queued) to r, which is
 *   r.queue_seq − H + 1 − (numbered runs between H and r that have left the line),
 * two index probes and a count of the runs that left out of order (cancelled from the middle, admitted
 * past an account at its limit, timed out): a short range of `runs_queue_left_idx`, whatever the depth.
 * A run not numbered yet is behind every numbered one: its place is the numbered runs still queued plus
 * the count of unnumbered runs up to it (`runs_queue_fresh_idx`, the runs of the last moments).
 *
 * Numbering is done by `numberQueuedRuns` under an exclusive advisory lock (QUEUE_GATE); every insert of a
 * queued run takes the same lock shared until its commit (GATE_CTE). So while numbers are handed out no
 * acceptance is in flight: every unnumbered run any reader can see is numbered in the same transaction,
 * in the order readers saw it, and no run accepted later can commit in between and change the order.
 * Numbers are assigned in one transaction from the highest number in use, so they have no gaps.
 */

/** Advisory lock key: numbering takes it exclusively, every acceptance shared (see above). */
export const QUEUE_GATE = 727_002;

/** A CTE for the statement that inserts a queued run: holds the gate shared until the commit. */
export const GATE_CTE = `gate as (select pg_advisory_xact_lock_shared(${QUEUE_GATE}))`;

/** The order of the line (admission follows it); columns of `runs`, optionally qualified. */
export const lineOrder = (t = '') => `${t}queue_seq, ${t}queued_at, ${t}id`;

/** Queued runs (the predicate of the runs_queue_* indexes), columns of table alias `t`. */
const queued = (t: string) => `${t}.status = 'pending' and ${t}.phase = 'queued'`;
/** Numbered runs that have left the line (the predicate of runs_queue_left_idx). */
const left = (t: string) => `${t}.queue_seq is not null and (${t}.status <> 'pending' or ${t}.phase <> 'queued')`;
/** Runs numbered per transaction (bounds how long acceptances wait on the gate). */
const BATCH = 5000;
/** How soon after an acceptance the process numbers the runs accepted meanwhile. */
const NUMBER_AFTER_MS = 50;

/** Numbers unnumbered queued runs, oldest first; returns how many. */
export async function numberQueuedRuns(em: Em): Promise<number> {
  return em.transactional(async (tx) => {
    await tx.execute(`select pg_advisory_xact_lock(${QUEUE_GATE})`);
    // A fresh snapshot after the lock: every acceptance that could be seen before has committed. The
    // update does not check the status again: a run admitted or cancelled meanwhile keeps its number
    // and counts as having left, so the numbers stay gapless.
    const rows = await tx.execute<{ n: number }[]>(
      `with last as (
         select greatest((select max(q.queue_seq) from runs q where ${queued('q')} and q.queue_seq is not null),
                         (select max(d.queue_seq) from runs d where ${left('d')}), 0) as n),
       fresh as (
         select id, row_number() over (order by queued_at, id) as k
           from (select f.id, f.queued_at from runs f where ${queued('f')} and f.queue_seq is null
                  order by f.queued_at, f.id limit ${BATCH}) f)
       update runs r set queue_seq = last.n + fresh.k from last, fresh where r.id = fresh.id
       returning 1 as n`,
    );
    return rows.length;
  });
}

interface Numberer {
  timer?: NodeJS.Timeout;
  running?: Promise<void>;
}
const numberers = new WeakMap<object, Numberer>();

/**
 * After an acceptance: numbers the runs accepted meanwhile, shortly, once per process however many
 * were accepted. Places are exact before that too; numbering only keeps the unnumbered tail short.
 */
export function scheduleNumbering(deps: Pick<RunsDeps, 'orm' | 'log'>): void {
  let n = numberers.get(deps.orm);
  if (!n) numberers.set(deps.orm, (n = {}));
  const state = n;
  if (state.timer) return;
  state.timer = setTimeout(() => {
    state.running = (async () => {
      try {
        while ((await numberQueuedRuns(fork(deps))) === BATCH);
      } catch (err) {
        // The database may be closing; the next acceptance (in any process) numbers these runs too.
        deps.log.debug({ err }, 'queued runs were not numbered');
      }
    })().finally(() => {
      state.timer = undefined;
      state.running = undefined;
    });
  }, NUMBER_AFTER_MS);
  state.timer.unref();
}

// Ends of the numbered part of the line, in runs_queue_line_idx's own order so that the plan reads one
// index entry whatever the statistics say (a queue filled in the last seconds has none yet).
const HEAD = `(select q.queue_seq from runs q where ${queued('q')} and q.queue_seq is not null order by q.queue_seq, q.queued_at, q.id limit 1)`;
const TAIL = `(select q.queue_seq from runs q where ${queued('q')} and q.queue_seq is not null
               order by q.queue_seq desc, q.queued_at desc, q.id desc limit 1)`;
/** Numbered runs that left the line with numbers strictly between `from` and `to`. */
const leftBetween = (from: string, to: string) => `(select count(*) from runs d where ${left('d')} and d.queue_seq > ${from} and d.queue_seq < ${to})`;

/**
 * A column expression: the exact place (1 = next) of run `t` when it is queued, else null. Its
 * subqueries run only for a queued run, and in the statement that reads the run, so the place and the
 * status come from one snapshot.
 */
export const positionSql = (t: string) => `case when ${queued(t)} then
  case when ${t}.queue_seq is not null
       then ${t}.queue_seq - ${HEAD} + 1 - ${leftBetween(HEAD, `${t}.queue_seq`)}
       else coalesce(${TAIL} - ${HEAD} + 1 - ${leftBetween(HEAD, TAIL)}, 0)
            + (select count(*) from runs u where ${queued('u')} and u.queue_seq is null and (u.queued_at, u.id) <= (${t}.queued_at, ${t}.id))
  end
end`;

const POSITIONS = statement('line_positions', `select r.id, ${positionSql('r')} as position from runs r where r.id = any($1::uuid[])`);

/** Exact places of the given runs (those queued now), read in one statement. */
export async function linePositions(em: Em, ids: string[]): Promise<Map<string, number>> {
  if (!ids.length) return new Map();
  const rows = await query<{ id: string; position: string | number | null }>(em, POSITIONS, [ids]);
  return new Map(rows.filter((r) => r.position !== null).map((r) => [String(r.id), Number(r.position)]));
}
