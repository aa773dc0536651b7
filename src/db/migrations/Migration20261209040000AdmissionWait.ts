import { Migration } from '@mikro-orm/migrations';
import { ADMIT_QUEUED_RETURNS } from './Migration20261204000000AdmissionFunctions.ts';
import { ADMIT_FAIR_BODY } from './Migration20261208000000RunPriorityAndFairness.ts';

/**
 * An admission round (`wr_admit_queued`) also returns, for each run it admits, how long the run waited
 * in the queue (from `queued_at` to the round), its priority class and whether it had a concurrency key:
 * what the queue-wait histogram records (docs/operations.md). The round already updates each admitted
 * row, so the wait comes with it and no statement is added. The round is otherwise the one of
 * Migration20261208000000RunPriorityAndFairness. A function's result type cannot be replaced in place:
 * it is dropped and created again, inside the migration's transaction.
 *
 * The new result columns are named `queued_*`: a plpgsql function's result columns are variables of its
 * body, and `priority` would collide with the column of that name.
 */
export class Migration20261209040000AdmissionWait extends Migration {
  override name = 'Migration20261209040000AdmissionWait';

  override up(): void {
    this.addSql(`drop function if exists "wr_admit_queued"(int, text, int, text, float8)`);
    this.addSql(`create function "wr_admit_queued"(${ADMIT_QUEUED_PARAMS}) returns ${ADMIT_WAIT_RETURNS}
  volatile language plpgsql as $$ ${ADMIT_WAIT_BODY} $$`);
  }

  override down(): void {
    this.addSql(`drop function if exists "wr_admit_queued"(int, text, int, text, float8)`);
    this.addSql(`create function "wr_admit_queued"(${ADMIT_QUEUED_PARAMS}) returns ${ADMIT_QUEUED_RETURNS}
  volatile language plpgsql as $$ ${ADMIT_FAIR_BODY} $$`);
  }
}

const ADMIT_QUEUED_PARAMS = `"round_capacity" int, "round_engine" text, "queue_window" int, "lease_holder" text, "lease_seconds" float8`;

const RETURNS_TAIL = 'looked_at int, picked_count int)';
const RETURNING_TAIL = 'run.steps_executed, run.last_sequence)';
if (!ADMIT_QUEUED_RETURNS.endsWith(RETURNS_TAIL) || ADMIT_FAIR_BODY.split(RETURNING_TAIL).length !== 2) {
  throw new Error('wr_admit_queued: the result columns to extend are not in the earlier round');
}

/** wr_admit_queued's result: the earlier columns, then the admitted run's wait, class and keyed, then the round's counts. */
export const ADMIT_WAIT_RETURNS = ADMIT_QUEUED_RETURNS.replace(
  RETURNS_TAIL,
  `queued_seconds float8, queued_priority smallint, queued_keyed boolean, ${RETURNS_TAIL}`,
);

/** wr_admit_queued's body: the fair round, whose update also returns the three columns above. */
export const ADMIT_WAIT_BODY = ADMIT_FAIR_BODY.replace(
  RETURNING_TAIL,
  `run.steps_executed, run.last_sequence,
              extract(epoch from clock_timestamp() - run.queued_at)::float8, run.priority, run.concurrency_key is not null)`,
);
