import { Migration } from '@mikro-orm/migrations';
import { ADMIT_QUEUED_BODY as ADMIT_QUEUED_BODY_BEFORE, ADMIT_QUEUED_RETURNS } from './Migration20261204000000AdmissionFunctions.ts';

/**
 * An admission round (`wr_admit_queued`) writes its picked runs found by primary key, whatever the
 * planner believes about the queue's depth. The round is otherwise the one of
 * Migration20261204000000AdmissionFunctions (which explains it); only the admitting update's fence changes.
 *
 * Before, that fence spelled out the line's index predicate (`status = 'pending' and phase = 'queued'`),
 * which let the planner reach the picked runs through runs_queue_line_idx. On statistics taken while the
 * queue was short, which is the usual state of a runs table that a burst of batches fills faster than
 * autovacuum analyzes it, the planner estimates one queued run and puts that index on the outer side of
 * the join: every round walked the whole line and compared each queued run with each picked one, so a
 * round's cost grew with the queue's depth. The fence now names the phase alone. It still excludes every
 * run that left the line since the round's snapshot: a run has a phase only while it is `pending`
 * (every statement that moves a run out of `pending` clears the phase), and under the admission lock
 * only a cancel or a queue timeout can move a queued run, both of which clear it. Without the status the
 * condition no longer implies the line's predicate, and the primary key is the only index that finds a
 * run by id.
 */
export class Migration20261208000000AdmitByPrimaryKey extends Migration {
  override name = 'Migration20261208000000AdmitByPrimaryKey';

  override up(): void {
    this.addSql(`create or replace function "wr_admit_queued"(${ADMIT_QUEUED_PARAMS}) returns ${ADMIT_QUEUED_RETURNS}
  volatile language plpgsql as $$ ${ADMIT_QUEUED_BODY} $$`);
  }

  override down(): void {
    this.addSql(`create or replace function "wr_admit_queued"(${ADMIT_QUEUED_PARAMS}) returns ${ADMIT_QUEUED_RETURNS}
  volatile language plpgsql as $$ ${ADMIT_QUEUED_BODY_BEFORE} $$`);
  }
}

const ADMIT_QUEUED_PARAMS = `"round_capacity" int, "round_engine" text, "queue_window" int, "lease_holder" text, "lease_seconds" float8`;

const FENCE_BEFORE = `from picked where run.id = picked.id and run.status = 'pending' and run.phase = 'queued'`;
const FENCE = `from picked where run.id = picked.id and run.phase = 'queued'`;

if (!ADMIT_QUEUED_BODY_BEFORE.includes(FENCE_BEFORE)) throw new Error('wr_admit_queued: the fence to replace is not in the earlier body');

/** wr_admit_queued's body: the earlier round with the admitting update fenced on the phase alone (above). */
export const ADMIT_QUEUED_BODY = ADMIT_QUEUED_BODY_BEFORE.replace(FENCE_BEFORE, FENCE);
