import { statement } from '../db/statement.ts';
import { RunSchema } from '../db/entities/index.ts';
import { leftQueue, queuedRun } from './run-predicates.ts';

/**
 * The line of queued runs (src/runs/queue-line.ts explains the numbering and why places are
 * exact): the numbering gate, the numbering statement and the place of a run.
 */

/** Advisory lock key: numbering takes it exclusively, every acceptance shared (src/runs/queue-line.ts). */
export const QUEUE_GATE = 727_002;

/** A CTE for the statement that inserts a queued run: holds the gate shared until the commit. */
export const GATE_CTE = `gate as (select pg_advisory_xact_lock_shared(${QUEUE_GATE}))`;

/** Runs numbered per transaction (bounds how long acceptances wait on the gate). */
export const NUMBER_BATCH = 5000;

/**
 * $1 how many at most: numbers unnumbered queued runs, oldest first, after the highest number in use,
 * under the gate taken exclusively, in one call of `wr_number_queued`. A function, because the numbering
 * must read the line in a snapshot taken after the gate was granted: one statement that took the gate in
 * a CTE would read with the snapshot it had before waiting, missing acceptances and numberings committed
 * meanwhile, and hand out numbers twice (src/db/migrations/Migration20261204000000AdmissionFunctions.ts).
 * Returns `numbered`, how many runs were numbered.
 */
export const NUMBER_QUEUED_RUNS = statement('number_queued_runs', 'select numbered from wr_number_queued($1::int)', [RunSchema]);

// Ends of the numbered part of the line, in runs_queue_line_idx's own order so that the plan reads one
// index entry whatever the statistics say (a queue filled in the last seconds has none yet).
const HEAD = `(select q.queue_seq from runs q where ${queuedRun('q')} and q.queue_seq is not null order by q.queue_seq, q.queued_at, q.id limit 1)`;
const TAIL = `(select q.queue_seq from runs q where ${queuedRun('q')} and q.queue_seq is not null
               order by q.queue_seq desc, q.queued_at desc, q.id desc limit 1)`;
/** Numbered runs that left the line with numbers strictly between `from` and `to`. */
const leftBetween = (from: string, to: string) => `(select count(*) from runs d where ${leftQueue('d')} and d.queue_seq > ${from} and d.queue_seq < ${to})`;

/**
 * A column expression: the exact place (1 = next) of run `t` when it is queued, else null. Its
 * subqueries run only for a queued run, and in the statement that reads the run, so the place and the
 * status come from one snapshot.
 */
export const positionSql = (t: string) => `case when ${queuedRun(t)} then
  case when ${t}.queue_seq is not null
       then ${t}.queue_seq - ${HEAD} + 1 - ${leftBetween(HEAD, `${t}.queue_seq`)}
       else coalesce(${TAIL} - ${HEAD} + 1 - ${leftBetween(HEAD, TAIL)}, 0)
            + (select count(*) from runs u where ${queuedRun('u')} and u.queue_seq is null and (u.queued_at, u.id) <= (${t}.queued_at, ${t}.id))
  end
end`;

/** $1 run ids: the place of each (null: not queued). */
export const LINE_POSITIONS = statement('line_positions', `select r.id, ${positionSql('r')} as position from runs r where r.id = any($1::uuid[])`, [RunSchema]);

