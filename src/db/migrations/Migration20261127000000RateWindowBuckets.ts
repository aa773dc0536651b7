import { Migration } from '@mikro-orm/migrations';

/**
 * The POST /runs window as 60 one-second buckets per API key instead of every counted request's time,
 * so a request costs the same whatever the key's limit (src/sql/rate-windows.ts). The windows in flight
 * are dropped with the old column: for at most a minute keys may make up to their limit again.
 */
export class Migration20261127000000RateWindowBuckets extends Migration {
  override name = 'Migration20261127000000RateWindowBuckets';

  override up(): void {
    this.addSql(`delete from "api_key_rate_windows"`);
    this.addSql(`alter table "api_key_rate_windows" drop column "hits"`);
    this.addSql(`alter table "api_key_rate_windows" add column "second" bigint not null, add column "counts" int[] not null`);
  }

  override down(): void {
    this.addSql(`delete from "api_key_rate_windows"`);
    this.addSql(`alter table "api_key_rate_windows" drop column "second", drop column "counts"`);
    this.addSql(`alter table "api_key_rate_windows" add column "hits" timestamptz[] not null`);
  }
}
