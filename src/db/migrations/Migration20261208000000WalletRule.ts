import { Migration } from '@mikro-orm/migrations';

/**
 * The wallet rule as two SQL functions beside the charge, called by the statements that fund and end
 * runs (docs/design/money.md#where-each-rule-is-written): `wr_wallet_holds` (a balance covers a hold) and
 * `wr_wallet_paid` (what a balance pays of a charge: never below zero). Their text is that of
 * WalletHoldsRoutine and WalletPaidRoutine (src/db/entities/routines.ts), so the schema diff finds nothing.
 */
export class Migration20261208000000WalletRule extends Migration {
  override name = 'Migration20261208000000WalletRule';

  override up(): void {
    this.addSql(
      `create or replace function "wr_wallet_holds"("balance" numeric, "hold" numeric) returns boolean
  immutable language sql as $$ select balance >= hold $$`,
    );
    this.addSql(
      `create or replace function "wr_wallet_paid"("balance" numeric, "charge" numeric) returns numeric
  immutable language sql as $$ select least(charge, balance) $$`,
    );
  }

  override down(): void {
    this.addSql('drop function if exists wr_wallet_holds(numeric, numeric)');
    this.addSql('drop function if exists wr_wallet_paid(numeric, numeric)');
  }
}
