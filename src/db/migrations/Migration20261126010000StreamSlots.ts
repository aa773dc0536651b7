import { Migration } from '@mikro-orm/migrations';

/**
 * Open-stream limits shared by every process on the database (src/runs/stream-slots.ts):
 * the open streams per holder, and what each process holds of them under a lease it renews.
 */
export class Migration20261126010000StreamSlots extends Migration {
  override name = 'Migration20261126010000StreamSlots';

  override up(): void {
    this.addSql(`create table "stream_slot_totals" ("holder" varchar(255) not null, "open" int not null, primary key ("holder"))`);
    this.addSql(
      `create table "stream_slot_leases" ("holder" varchar(255) not null, "process_id" varchar(255) not null, ` +
        `"open" int not null, "lease_until" timestamptz not null, primary key ("holder", "process_id"))`,
    );
    this.addSql(`create index "stream_slot_leases_process_idx" on "stream_slot_leases" ("process_id")`);
    this.addSql(`create index "stream_slot_leases_lease_idx" on "stream_slot_leases" ("lease_until")`);
  }

  override down(): void {
    this.addSql(`drop table "stream_slot_leases"`);
    this.addSql(`drop table "stream_slot_totals"`);
  }
}
