import { Migration } from '@mikro-orm/migrations';

/**
 * `wr_refuse(reason)` (the routine `RefuseRoutine` in src/db/entities): raises SQLSTATE WR001 with the
 * reason as its message, for a statement that must fail rather than return no rows when its fence does
 * not hold. The CASE that calls it evaluates it only when the fence failed; a volatile function is never
 * folded at plan time. The body is the routine's, so the schema diff finds nothing to change.
 */
export class Migration20261124120000SettlementRefusal extends Migration {
  override name = 'Migration20261124120000SettlementRefusal';

  override up(): void {
    this.addSql(
      `create or replace function "wr_refuse"("reason" text) returns int language plpgsql as $$ begin
  raise exception using errcode = 'WR001', message = reason; end $$`,
    );
  }

  override down(): void {
    this.addSql(`drop function if exists wr_refuse(text)`);
  }
}
