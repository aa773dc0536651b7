import { Migration } from '@mikro-orm/migrations';

/**
 * `run_events` without its foreign key to `runs`. Every event is inserted by the statement that writes
 * its run's row, selected from that row (src/sql/run-events.ts runEventsCte; the acceptance inserts
 * `run.queued` from the run it inserts), and runs are never deleted, so the key could never fail;
 * checking it cost a query per event (a 3-step run writes about a dozen), each locking the run's row.
 */
export class Migration20261130000000RunEventsWithoutForeignKey extends Migration {
  override name = 'Migration20261130000000RunEventsWithoutForeignKey';

  override up(): void {
    this.addSql(`alter table "run_events" drop constraint if exists "run_events_run_id_foreign"`);
  }

  override down(): void {
    this.addSql(`alter table "run_events" add constraint "run_events_run_id_foreign" foreign key ("run_id") references "runs" ("id") on delete cascade`);
  }
}
