import { Migration } from '@mikro-orm/migrations';

/**
 * A replayed run names the run it replays (`replay_of`, POST /runs/{id}/replay: docs/design/runs-in-sets.md).
 * Nullable with no default: adding it is a catalog change, no row is rewritten.
 */
export class Migration20261207070000ReplayOf extends Migration {
  override name = 'Migration20261207070000ReplayOf';

  override up(): void {
    this.addSql(`alter table "runs" add column "replay_of" uuid null`);
  }

  override down(): void {
    this.addSql(`alter table "runs" drop column "replay_of"`);
  }
}
