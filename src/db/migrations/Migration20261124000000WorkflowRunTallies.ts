import { Migration } from '@mikro-orm/migrations';

/**
 * Completed-run counts per workflow on sharded rows (workflow_run_tallies): every completed run used to
 * update its workflow's one row, and all runs of a workflow queued on that row lock until each commit.
 */
export class Migration20261124000000WorkflowRunTallies extends Migration {
  override name = 'Migration20261124000000WorkflowRunTallies';

  override up(): void {
    this.addSql(
      `create table "workflow_run_tallies" ("workflow_id" uuid not null, "shard" smallint not null, ` +
        `"runs" int not null default 0, primary key ("workflow_id", "shard"))`,
    );
    this.addSql(
      `alter table "workflow_run_tallies" add constraint "workflow_run_tallies_workflow_id_foreign" foreign key ` +
        `("workflow_id") references "workflows" ("id") on delete cascade`,
    );
  }

  override down(): void {
    this.addSql(`drop table "workflow_run_tallies"`);
  }
}
