import { Migration } from '@mikro-orm/migrations';

/**
 * `ledger_entries` without its foreign key to `accounts`. Every ledger row is inserted from the wallet
 * row it mirrors, by the statement that changes that wallet (src/sql/run-money.ts,
 * catalog-accounts.ts), and accounts are never deleted, so the key could not fail. Its check ran once per
 * row (a wallet-funded run writes three) and locked the account's row `for key share` from the
 * settlement's transaction, beside the acceptances' transactions locking it the same way for their
 * runs: each such pair made a multixact.
 */
export class Migration20261202020000LedgerWithoutAccountKey extends Migration {
  override name = 'Migration20261202020000LedgerWithoutAccountKey';

  override up(): void {
    this.addSql(`alter table "ledger_entries" drop constraint if exists "ledger_entries_account_id_foreign"`);
  }

  override down(): void {
    this.addSql(
      `alter table "ledger_entries" add constraint "ledger_entries_account_id_foreign" foreign key ("account_id") ` +
        `references "accounts" ("id") on delete cascade`,
    );
  }
}
