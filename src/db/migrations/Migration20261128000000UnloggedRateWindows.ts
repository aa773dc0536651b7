import { Migration } from '@mikro-orm/migrations';

/**
 * The POST /runs windows (`api_key_rate_windows`) are unlogged: counts of the last minute, rewritten by
 * every request, that nothing needs after a Postgres crash (the table then comes back empty: for at
 * most a minute keys may make up to their limit again, as after the bucket migration). Their updates
 * write no WAL, and a transaction that writes only them commits without waiting for a WAL flush.
 */
export class Migration20261128000000UnloggedRateWindows extends Migration {
  override name = 'Migration20261128000000UnloggedRateWindows';

  override up(): void {
    this.addSql(`alter table "api_key_rate_windows" set unlogged`);
  }

  override down(): void {
    this.addSql(`alter table "api_key_rate_windows" set logged`);
  }
}
