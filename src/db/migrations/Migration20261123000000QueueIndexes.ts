import { Migration } from '@mikro-orm/migrations';

/**
 * Queue reads without scans: the queued runs in FIFO order (admission reads the head, the queue-order
 * snapshot of src/runs/queue-positions.ts reads it in order, and runs queued since are counted
 * along it), and completed runs by completion time (the duration of the most recent runs gives queue
 * ETAs).
 */
export class Migration20261123000000QueueIndexes extends Migration {
  override name = 'Migration20261123000000QueueIndexes';

  override up(): void {
    this.addSql(`create index "runs_queue_idx" on "runs" ("queued_at", "id") where status = 'pending' and phase = 'queued'`);
    this.addSql(`create index "runs_completed_idx" on "runs" ("completed_at") where completed_at is not null`);
  }

  override down(): void {
    this.addSql(`drop index "runs_queue_idx"`);
    this.addSql(`drop index "runs_completed_idx"`);
  }
}
