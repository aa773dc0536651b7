import { Migration } from '@mikro-orm/migrations';

/**
 * A run accepted with a later start (`Start-After`, `startAt`: docs/design/flow-control.md) waits in phase
 * `scheduled` until `scheduled_for`, outside the queue's line. The column is nullable with no default (a
 * catalog change, no row rewritten); the partial index holds only the runs waiting for their start, which
 * the engines' rounds read by time. A debounced run (`debounce`) also carries its key and the latest start
 * its burst may reach, found by key while it waits (the second partial index).
 */
export class Migration20261208000000ScheduledRuns extends Migration {
  override name = 'Migration20261208000000ScheduledRuns';

  override up(): void {
    this.addSql(`alter table "runs" add column "scheduled_for" timestamptz null`);
    this.addSql(`create index "runs_scheduled_idx" on "runs" ("scheduled_for", "id") where status = 'pending' and phase = 'scheduled'`);
    this.addSql(`alter table "runs" add column "debounce_key" text null, add column "debounce_until" timestamptz null`);
    this.addSql(
      `create index "runs_debounce_idx" on "runs" ("account_id", "debounce_key") ` +
        `where status = 'pending' and phase = 'scheduled' and debounce_key is not null`,
    );
  }

  override down(): void {
    this.addSql(`drop index "runs_debounce_idx"`);
    this.addSql(`drop index "runs_scheduled_idx"`);
    this.addSql(`alter table "runs" drop column "scheduled_for", drop column "debounce_key", drop column "debounce_until"`);
  }
}
