import { Migration } from '@mikro-orm/migrations';

/**
 * `api_key_rate_windows.total`: the sum of the window's 60 buckets, kept beside them by the statement
 * that counts a request (src/sql/rate-windows.ts), so counting reads one number instead of adding up
 * the buckets three times per request; `total_second`: the `second` it was kept for. Existing rows, and
 * rows still written by processes of the previous version during an upgrade, have none that matches,
 * so their total is added up on their next count.
 */
export class Migration20261201000000RateWindowTotal extends Migration {
  override name = 'Migration20261201000000RateWindowTotal';

  override up(): void {
    this.addSql(`alter table "api_key_rate_windows" add column "total" int not null default 0, add column "total_second" bigint null`);
  }

  override down(): void {
    this.addSql(`alter table "api_key_rate_windows" drop column "total", drop column "total_second"`);
  }
}
