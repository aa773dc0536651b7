import { Migration } from '@mikro-orm/migrations';

/**
 * The POST /runs sliding window per API key in Postgres (api_key_rate_windows), so several API
 * processes on one database enforce one limit instead of one each.
 */
export class Migration20261125000000ApiKeyRateWindows extends Migration {
  override name = 'Migration20261125000000ApiKeyRateWindows';

  override up(): void {
    this.addSql(
      `create table "api_key_rate_windows" ("api_key_id" uuid not null, "hits" timestamptz[] not null, "allowed" boolean not null, primary key ("api_key_id"))`,
    );
    this.addSql(
      `alter table "api_key_rate_windows" add constraint "api_key_rate_windows_api_key_id_foreign" foreign key ` +
        `("api_key_id") references "api_keys" ("id") on update cascade on delete cascade`,
    );
  }

  override down(): void {
    this.addSql(`drop table "api_key_rate_windows"`);
  }
}
