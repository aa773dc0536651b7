import { Migration } from '@mikro-orm/migrations';

/**
 * `api_key_rate_windows.total`: the sum of the window's 60 buckets, kept beside them by the statement
 * that counts a request (src/sql/rate-windows.ts), so counting reads one number instead of adding up
 * the buckets three times per request. Existing rows get the sum of their buckets.
 */
export class Migration20261201000000RateWindowTotal extends Migration {
  override name = 'Migration20261201000000RateWindowTotal';

  override up(): void {
    this.addSql(`alter table "api_key_rate_windows" add column "total" int not null default 0`);
    this.addSql(`update "api_key_rate_windows" set "total" = coalesce((select sum(c) from unnest("counts") c), 0)`);
  }

  override down(): void {
    this.addSql(`alter table "api_key_rate_windows" drop column "total"`);
  }
}
