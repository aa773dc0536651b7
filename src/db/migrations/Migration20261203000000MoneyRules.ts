import { Migration } from '@mikro-orm/migrations';

/**
 * The charge of a run as two SQL functions, the one definition every statement that finishes a run
 * calls (docs/design/money.md#what-is-charged): `wr_run_charge` and `wr_billed`. Their text is that of
 * MoneyRulesRoutine and BilledRoutine (src/db/entities/routines.ts), so the schema diff finds nothing.
 * Immutable `language sql` single expressions, so the planner inlines them into the statements.
 */
export class Migration20261203000000MoneyRules extends Migration {
  override name = 'Migration20261203000000MoneyRules';

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
    this.addSql(
      `create or replace function "wr_within_compute_limit"("compute" numeric, "steps" int, "step_usd" numeric, "compute_limit" numeric) returns boolean
  immutable language sql as $$ select steps is null or compute + steps * step_usd <= compute_limit $$`,
    );
  }

  override down(): void {
    this.addSql('drop function if exists wr_within_compute_limit(numeric, int, numeric, numeric)');
    this.addSql('drop function if exists wr_run_charge(text, text, numeric, numeric)');
    this.addSql('drop function if exists wr_billed(numeric, numeric)');
  }
}
