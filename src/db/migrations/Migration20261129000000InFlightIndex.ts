import { Migration } from '@mikro-orm/migrations';

/**
 * The runs in flight (running, suspended, or admitted and not yet started) in an index of their own.
 * Every admission round counts them per account and the engines' lease sweeps look for them; through
 * `runs_status_queued_idx` both read every pending run, so a deep queue (runs waiting on their account's
 * concurrency limit) made each round as slow as the queue was long. The in-flight set is bounded by
 * RUN_CAPACITY, so this index stays small whatever waits in the queue.
 */
export class Migration20261129000000InFlightIndex extends Migration {
  override name = 'Migration20261129000000InFlightIndex';

  override up(): void {
    this.addSql(
      `create index "runs_in_flight_idx" on "runs" ("account_id") where status in ('running', ` +
        `'suspended') or (status = 'pending' and phase in ('starting', 'preparing'))`,
    );
  }

  override down(): void {
    this.addSql(`drop index "runs_in_flight_idx"`);
  }
}
