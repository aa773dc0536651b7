import { Migration } from '@mikro-orm/migrations';

/**
 * A queued run's place as a function, `wr_queue_place`, called by the statements that read a run only
 * when the run is queued (positionSql, now src/sql/queue-places.ts). As subqueries of the read itself the place
 * cost every read: the executor sets up every subplan of a statement each time it runs it, taken or not,
 * and most reads are of runs that are not queued. Its text is what QueuePlaceRoutine (until Migration20261209030000DropQueueNumbering)
 * (src/db/entities/queue-routines.ts) declares, so the schema diff finds nothing.
 */
export class Migration20261206000000QueuePlace extends Migration {
  override name = 'Migration20261206000000QueuePlace';

  override up(): void {
    this.addSql(`create or replace function "wr_queue_place"(${QUEUE_PLACE_PARAMS}) returns bigint
  language plpgsql as $$ ${QUEUE_PLACE_BODY} $$`);
  }

  override down(): void {
    this.addSql('drop function if exists wr_queue_place(bigint, timestamptz, uuid)');
  }
}

const QUEUE_PLACE_PARAMS = `"run_seq" bigint, "run_queued_at" timestamptz, "run_id" uuid`;

/**
 * wr_queue_place(run_seq, run_queued_at, run_id): the exact place (1 = next) of a queued run, given its
 * number (`queue_seq`, null while not numbered), acceptance time and id (Migration20261126000000QueueLine explains
 * the numbering). A numbered run's place is its number less the head's, less the numbered runs that
 * left the line between them; an unnumbered run is behind every numbered one, then in acceptance order.
 * Created VOLATILE (PostgreSQL's default); Migration20261208000000QueuePlaceStable makes it STABLE, so its
 * queries read with the snapshot of the statement that calls it and a place and the status beside it agree. The
 * predicates are those of runs_queue_line_idx, runs_queue_left_idx and runs_queue_fresh_idx, spelled
 * out so each query reads its index.
 */
export const QUEUE_PLACE_BODY = `declare
  head bigint;
  tail bigint;
begin
  select queued.queue_seq into head from runs queued
   where queued.status = 'pending' and queued.phase = 'queued' and queued.queue_seq is not null
   order by queued.queue_seq, queued.queued_at, queued.id limit 1;
  if run_seq is not null then
    return run_seq - head + 1 - (select count(*) from runs departed
      where departed.queue_seq is not null and (departed.status <> 'pending' or departed.phase <> 'queued')
        and departed.queue_seq > head and departed.queue_seq < run_seq);
  end if;
  select queued.queue_seq into tail from runs queued
   where queued.status = 'pending' and queued.phase = 'queued' and queued.queue_seq is not null
   order by queued.queue_seq desc, queued.queued_at desc, queued.id desc limit 1;
  return coalesce(tail - head + 1 - (select count(*) from runs departed
      where departed.queue_seq is not null and (departed.status <> 'pending' or departed.phase <> 'queued')
        and departed.queue_seq > head and departed.queue_seq < tail), 0)
    + (select count(*) from runs fresh
        where fresh.status = 'pending' and fresh.phase = 'queued' and fresh.queue_seq is null
          and (fresh.queued_at, fresh.id) <= (run_queued_at, run_id));
end`;
