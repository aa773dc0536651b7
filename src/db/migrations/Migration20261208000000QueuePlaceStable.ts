import { Migration } from '@mikro-orm/migrations';

/**
 * Marks `wr_queue_place` STABLE. Declared without a volatility it was VOLATILE, so each of its queries took
 * a fresh snapshot: a numbering committed between them made one read see the head before the numbering
 * and the tail after it, and a queued run read place 0. STABLE queries read with the snapshot of the
 * statement that calls the function, so the run's row and its place come from one snapshot. MikroORM's
 * Routine knows only immutable or volatile (`deterministic`); left unset, its schema diff ignores this.
 */
export class Migration20261208000000QueuePlaceStable extends Migration {
  override name = 'Migration20261208000000QueuePlaceStable';

  override up(): void {
    this.addSql('alter function wr_queue_place(bigint, timestamptz, uuid) stable');
  }

  override down(): void {
    this.addSql('alter function wr_queue_place(bigint, timestamptz, uuid) volatile');
  }
}
