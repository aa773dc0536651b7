import { Migration } from '@mikro-orm/migrations';
import { NUMBER_QUEUED_BODY, NUMBER_QUEUED_RETURNS } from './Migration20261204000000AdmissionFunctions.ts';
import { QUEUE_PLACE_BODY } from './Migration20261206000000QueuePlace.ts';

/**
 * The queue's numbering goes (docs/design/flow-control.md#places): since admission takes runs in the fair
 * order and a place is counted in that order (`wr_fair_place`), nothing reads `queue_seq`, yet numbering
 * rewrote every run that waited more than a moment (a new version of the row, an entry in every index).
 * Gone: the numbering function, the numbered place function, the column and its three indexes.
 *
 * A place is counted, so it must read the index of queued runs, whose entries are the runs ahead, whatever
 * the planner's statistics say: on statistics taken while the table was small (before a burst filled the
 * queue) it scans every run of the table instead, ended ones included, for each read. So `wr_fair_place`
 * plans with sequential and bitmap scans off, as an admission round does, set on the function (for its own
 * queries, restored on return).
 */
export class Migration20261209030000DropQueueNumbering extends Migration {
  override name = 'Migration20261209030000DropQueueNumbering';

  override up(): void {
    this.addSql('drop function if exists wr_number_queued(int)');
    this.addSql('drop function if exists wr_queue_place(bigint, timestamptz, uuid)');
    this.addSql(`drop index "runs_queue_line_idx"`);
    this.addSql(`drop index "runs_queue_fresh_idx"`);
    this.addSql(`drop index "runs_queue_left_idx"`);
    this.addSql(`alter table "runs" drop column "queue_seq"`);
    this.addSql(`alter function wr_fair_place(${FAIR_PLACE_ARGS}) set enable_seqscan = off set enable_bitmapscan = off`);
  }

  override down(): void {
    this.addSql(`alter function wr_fair_place(${FAIR_PLACE_ARGS}) reset enable_seqscan reset enable_bitmapscan`);
    this.addSql(`alter table "runs" add column "queue_seq" bigint null`);
    this.addSql(`create index "runs_queue_line_idx" on "runs" ("queue_seq", "queued_at", "id") where status = 'pending' and phase = 'queued'`);
    this.addSql(`create index "runs_queue_fresh_idx" on "runs" ("queued_at", "id") where status = 'pending' and phase = 'queued' and queue_seq is null`);
    this.addSql(`create index "runs_queue_left_idx" on "runs" ("queue_seq") where queue_seq is not null and (status <> 'pending' or phase <> 'queued')`);
    this.addSql(`create or replace function "wr_queue_place"("run_seq" bigint, "run_queued_at" timestamptz, "run_id" uuid) returns bigint
  stable language plpgsql as $$ ${QUEUE_PLACE_BODY} $$`);
    this.addSql(`create or replace function "wr_number_queued"("batch_size" int) returns ${NUMBER_QUEUED_RETURNS}
  volatile language plpgsql as $$ ${NUMBER_QUEUED_BODY} $$`);
  }
}

const FAIR_PLACE_ARGS = 'smallint, bigint, timestamptz, uuid';
