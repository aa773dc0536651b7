import { Migration } from '@mikro-orm/migrations';

/**
 * `wr_reserve_spend_cap(key, since, price, cap)` (the routine `SpendCapRoutine` in src/db/entities): the
 * spend-cap reservation of the one-statement POST /runs (src/sql/accept-runs.ts). The body is the routine's,
 * so the schema diff finds nothing to change.
 */
export class Migration20261125120000SpendCapReservation extends Migration {
  override name = 'Migration20261125120000SpendCapReservation';

  override up(): void {
    this.addSql(
      `create or replace function "wr_reserve_spend_cap"("key" uuid, "since" timestamptz, "price" numeric, ` +
        `"cap" numeric) returns int language plpgsql as $$ begin
  perform 1 from api_keys where id = key for update;
  if (select coalesce(sum(cap_usd), 0) from runs where api_key_id = key and created_at >= since) + price > cap then
    raise exception using errcode = 'WR002', message = 'spend cap reached';
  end if;
  return 1;
end $$`,
    );
  }

  override down(): void {
    this.addSql(`drop function if exists wr_reserve_spend_cap(uuid, timestamptz, numeric, numeric)`);
  }
}
