import { Migration } from '@mikro-orm/migrations';

/** The body of `wr_spend_cap_refusals`, also SpendCapRefusalsRoutine's (src/db/entities/routines.ts), so the schema diff finds nothing. */
export const SPEND_CAP_REFUSALS_BODY = `begin
  perform 1 from api_keys where id = any(key_ids) order by id for update;
  declare
    capped record;
    current_key uuid;
    window_start timestamptz;
    reserved numeric;
    taken numeric;
    refused bigint[] := '{}';
  begin
    for capped in
      select c.* from unnest(ords, key_ids, since, prices, caps, accounts, idempotency_keys)
                        as c(ord, api_key, window_since, price, cap, account, idempotency_key)
       where c.idempotency_key is null or not exists (select 1 from idempotency_records r
         where r.account_id = c.account and r.key = c.idempotency_key and r.expires_at > now())
       order by c.api_key, c.ord
    loop
      if capped.api_key is distinct from current_key then
        current_key := capped.api_key;
        window_start := null;
        taken := 0;
      end if;
      if capped.window_since is distinct from window_start then
        window_start := capped.window_since;
        reserved := (select coalesce(sum(cap_usd), 0) from runs where api_key_id = current_key and created_at >= window_start);
      end if;
      if reserved + taken + capped.price > capped.cap then
        refused := refused || capped.ord;
      else
        taken := taken + capped.price;
      end if;
    end loop;
    return refused;
  end;
end`;

/**
 * POST /runs accepted in batches (src/sql/accept-runs.ts):
 * - `wr_spend_cap_refusals`, the spend-cap check of a batch, which answers with the calls that do not fit
 *   instead of raising. Its body is SpendCapRefusalsRoutine's (src/db/entities/routines.ts), so the schema
 *   diff finds nothing; it replaces `wr_reserve_spend_cap`, which raised for one run.
 * - `api_key_rate_windows.last_counted`: how many requests the row's last count allowed, so a statement
 *   counting several requests of a key learns where the window stood before them.
 */
export class Migration20261204380000AcceptRunsInBatches extends Migration {
  override name = 'Migration20261204380000AcceptRunsInBatches';

  override up(): void {
    this.addSql(`alter table "api_key_rate_windows" add column "last_counted" int not null default 0`);
    this.addSql(
      `create or replace function "wr_spend_cap_refusals"("ords" bigint[], "key_ids" uuid[], "since" timestamptz[], "prices" numeric[], ` +
        `"caps" numeric[], "accounts" uuid[], "idempotency_keys" text[]) returns bigint[] language plpgsql as $$ ${SPEND_CAP_REFUSALS_BODY} $$`,
    );
    this.addSql(`drop function if exists wr_reserve_spend_cap(uuid, timestamptz, numeric, numeric)`);
  }

  override down(): void {
    this.addSql(`drop function if exists wr_spend_cap_refusals(bigint[], uuid[], timestamptz[], numeric[], numeric[], uuid[], text[])`);
    this.addSql(`alter table "api_key_rate_windows" drop column "last_counted"`);
  }
}
