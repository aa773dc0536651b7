import { Migration } from '@mikro-orm/migrations';

/**
 * A run's caller metadata, with its pairs in `run_labels` for `GET /runs?metadata[KEY]=VALUE` (ordered
 * like an account's runs, so a filtered page reads as few rows as an unfiltered one), and its
 * `Cancel-After` deadline (a partial index holds only live runs that have one, for the engines'
 * periodic rounds). The constant default keeps the column's addition a catalog change: existing rows
 * are not rewritten.
 */
export class Migration20261206000000RunMetadataAndDeadline extends Migration {
  override name = 'Migration20261206000000RunMetadataAndDeadline';

  override up(): void {
    this.addSql(`alter table "runs" add column "metadata" jsonb not null default '{}', add column "deadline" timestamptz null`);
    this.addSql(
      `create table "run_labels" ("account_id" uuid not null, "key" text not null, "value" text not null, ` +
        `"created_at" timestamptz not null, "run_id" uuid not null, primary key ("account_id", "key", "value", "created_at", "run_id"))`,
    );
    this.addSql(`create index "runs_deadline_idx" on "runs" ("deadline") where deadline is not null and status in ('pending', 'running', 'suspended')`);
  }

  override down(): void {
    this.addSql(`drop index "runs_deadline_idx"`);
    this.addSql(`drop table "run_labels"`);
    this.addSql(`alter table "runs" drop column "deadline", drop column "metadata"`);
  }
}
