import { Migration } from '@mikro-orm/migrations';

/**
 * Exact queue places at any depth (the numbering, dropped by Migration20261209030000DropQueueNumbering): each queued run's gapless place
 * number, the line in its order (admission reads the head), the runs not numbered yet, and the numbered
 * runs that left the line (counted between the head and a reader's run). The old acceptance-order index
 * goes: two indexes over the queued runs let a planner without statistics pick the wrong one.
 */
export class Migration20261126000000QueueLine extends Migration {
  override name = 'Migration20261126000000QueueLine';

  override up(): void {
    this.addSql(`alter table "runs" add column "queue_seq" bigint null`);
    this.addSql(`create index "runs_queue_line_idx" on "runs" ("queue_seq", "queued_at", "id") where status = 'pending' and phase = 'queued'`);
    this.addSql(`create index "runs_queue_fresh_idx" on "runs" ("queued_at", "id") where status = 'pending' and phase = 'queued' and queue_seq is null`);
    this.addSql(`create index "runs_queue_left_idx" on "runs" ("queue_seq") where queue_seq is not null and (status <> 'pending' or phase <> 'queued')`);
    // The line replaces the acceptance-time order; the queue timeout reads runs_status_queued_idx.
    this.addSql(`drop index "runs_queue_idx"`);
  }

  override down(): void {
    this.addSql(`create index "runs_queue_idx" on "runs" ("queued_at", "id") where status = 'pending' and phase = 'queued'`);
    this.addSql(`drop index "runs_queue_left_idx"`);
    this.addSql(`drop index "runs_queue_fresh_idx"`);
    this.addSql(`drop index "runs_queue_line_idx"`);
    this.addSql(`alter table "runs" drop column "queue_seq"`);
  }
}
