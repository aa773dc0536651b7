import { Migration } from '@mikro-orm/migrations';

/**
 * `run_events` is keyed by `(run_id, sequence)`, the key every reader uses, instead of a `bigserial`
 * id no query reads by: each event (a dozen per run) had an entry in both indexes and a sequence draw.
 * The primary key's index replaces the unique one on the same columns (built once, here).
 */
export class Migration20261128010000RunEventsKey extends Migration {
  override name = 'Migration20261128010000RunEventsKey';

  override up(): void {
    this.addSql(`alter table "run_events" drop constraint "run_events_pkey"`);
    this.addSql(`alter table "run_events" drop column "id"`);
    this.addSql(
      `alter table "run_events" drop constraint "run_events_run_sequence_unique", ` + `add constraint "run_events_pkey" primary key ("run_id", "sequence")`,
    );
  }

  override down(): void {
    this.addSql(`alter table "run_events" drop constraint "run_events_pkey"`);
    this.addSql(`alter table "run_events" add constraint "run_events_run_sequence_unique" unique ("run_id", "sequence")`);
    this.addSql(`alter table "run_events" add column "id" bigserial primary key`);
  }
}
