import { Migration } from '@mikro-orm/migrations';

/**
 * Drops `wr_refuse`: no statement raises to refuse any more. The set-based statements answer a refusal
 * as a row (src/db/batch.ts), and nothing commits together with a statement that would need an error to
 * stop its COMMIT.
 */
export class Migration20261205000000NoRefusalsRaised extends Migration {
  override name = 'Migration20261205000000NoRefusalsRaised';

  override up(): void {
    this.addSql(`drop function if exists wr_refuse(text)`);
  }

  override down(): void {
    this.addSql(
      `create or replace function "wr_refuse"("reason" text) returns int language plpgsql as $$ begin
  raise exception using errcode = 'WR001', message = reason; end $$`,
    );
  }
}
