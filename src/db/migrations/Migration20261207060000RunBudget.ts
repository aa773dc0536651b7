import { Migration } from '@mikro-orm/migrations';

/**
 * The run budget of an API key (docs/design/batch-runs.md#run-budget): `api_keys.run_budget_per_minute`
 * (a constant default, so existing rows are not rewritten) and `api_key_run_windows`, the runs its
 * batches started in each of the last 60 seconds, one row per key shaped like its request window.
 */
export class Migration20261207060000RunBudget extends Migration {
  override name = 'Migration20261207060000RunBudget';

  override up(): void {
    this.addSql(`alter table "api_keys" add column "run_budget_per_minute" int not null default 10000`);
    this.addSql(
      `create table "api_key_run_windows" ("api_key_id" uuid not null, "second" bigint not null, "counts" int[] not null, ` +
        `"total" int not null default 0, "total_second" bigint null, "allowed" boolean not null, primary key ("api_key_id"))`,
    );
    this.addSql(
      `alter table "api_key_run_windows" add constraint "api_key_run_windows_api_key_id_foreign" foreign key ` +
        `("api_key_id") references "api_keys" ("id") on update cascade on delete cascade`,
    );
  }

  override down(): void {
    this.addSql(`drop table "api_key_run_windows"`);
    this.addSql(`alter table "api_keys" drop column "run_budget_per_minute"`);
  }
}
