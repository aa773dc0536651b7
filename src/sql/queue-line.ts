import { statement } from '../db/statement.ts';
import { RunSchema } from '../db/entities/index.ts';
import { queuedRun } from '../db/entities/run-predicates.ts';

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

/**
 * A column expression: the exact place (1 = next) of run `t` when it is queued, else null: the queued
 * runs admission takes before it, plus one (docs/design/flow-control.md#places). Computed only for a
 * queued run, by `wr_fair_place` (src/db/migrations/Migration20261208000000RunPriorityAndFairness.ts),
 * with the snapshot of the statement that reads the run, so the place and the status agree.
 */
export const positionSql = (t: string) => `case when ${queuedRun(t)} then wr_fair_place(${t}.priority, ${t}.fair_pass, ${t}.queued_at, ${t}.id) end`;

/** $1 run ids: the place of each (null: not queued). */
export const LINE_POSITIONS = statement('line_positions', `select r.id, ${positionSql('r')} as position from runs r where r.id = any($1::uuid[])`, [RunSchema]);
