import { Migration } from '@mikro-orm/migrations';

/**
 * The charge of a run as two SQL functions, the one definition every statement that finishes a run
 * calls (docs/design/money.md#what-is-charged): `wr_run_charge` and `wr_billed`. Their text is that of
 * RunChargeRoutine and BilledRoutine (src/db/entities/routines.ts), so the schema diff finds nothing.
 * Immutable `language sql` single expressions, so the planner inlines them into the statements.
 */
export class Migration20261203000000RunCharge extends Migration {
  override name = 'Migration20261203000000RunCharge';

  override up(): void {
    this.addSql(
      `create or replace function "wr_run_charge"("charged" text, "status" text, "creator_price" numeric, "compute" numeric) returns numeric
  immutable language sql as $$ select round(case when charged = 'full' then creator_price + compute
  when charged = 'compute' and (compute <> 0 or status = 'completed') then compute when status = 'completed' then 0 end, 6) $$`,
    );
    this.addSql(
      `create or replace function "wr_billed"("charge" numeric, "bundle_price" numeric) returns numeric
  immutable language sql as $$ select case when charge is not null then coalesce(bundle_price, charge) end $$`,
    );
  }

  override down(): void {
    this.addSql('drop function if exists wr_run_charge(text, text, numeric, numeric)');
    this.addSql('drop function if exists wr_billed(numeric, numeric)');
  }
}
