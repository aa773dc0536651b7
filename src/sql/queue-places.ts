import { statement } from '../db/statement.ts';
import { RunSchema } from '../db/entities/index.ts';
import { queuedRun } from '../db/entities/run-predicates.ts';

/**
 * A column expression: the exact place (1 = next) of run `t` when it is queued, else null: the queued
 * runs admission takes before it, plus one (docs/design/flow-control.md#places). Computed only for a
 * queued run, by `wr_fair_place` (src/db/migrations/Migration20261208000000RunPriorityAndFairness.ts),
 * with the snapshot of the statement that reads the run, so the place and the status agree.
 */
export const positionSql = (t: string) => `case when ${queuedRun(t)} then wr_fair_place(${t}.priority, ${t}.fair_pass, ${t}.queued_at, ${t}.id) end`;

/** $1 run ids: the place of each (null: not queued). */
export const LINE_POSITIONS = statement('line_positions', `select r.id, ${positionSql('r')} as position from runs r where r.id = any($1::uuid[])`, [RunSchema]);
