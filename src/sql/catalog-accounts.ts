import { statement } from '../db/statement.ts';
import { AccountSchema, ApiKeySchema, LedgerEntrySchema, ProviderKeySchema, WalletSchema, WebhookEndpointSchema } from '../db/entities/index.ts';

/**
 * The catalog loader's statements for accounts and what belongs to them (src/catalog/load-catalog.ts):
 * tables `accounts`, `wallets`, `ledger_entries` (the opening credit), `provider_keys`, `api_keys`,
 * `webhook_endpoints`. They run in the load's one transaction, under LOCK_CATALOG_LOAD.
 */

/** Two processes starting together (API and worker) load the same file: the load holds this lock. */
export const LOCK_CATALOG_LOAD = statement('catalog_lock_load', `select pg_advisory_xact_lock(7348190021)`, []);

/** $1 handle. */
export const CATALOG_ACCOUNT_BY_HANDLE = statement('catalog_account_by_handle', `select * from accounts where handle = $1`, [AccountSchema]);

/** $1 account id. */
export const CATALOG_ACCOUNT_BY_ID = statement('catalog_account_by_id', `select * from accounts where id = $1::uuid`, [AccountSchema]);

/** $1 id, $2 handle, $3 restricted, $4 listings paused, $5 max concurrent runs, $6 connections (JSON text). */
export const CATALOG_INSERT_ACCOUNT = statement(
  'catalog_insert_account',
  `insert into accounts (id, handle, restricted, listings_paused, max_concurrent_runs, connections, created_at)
   values ($1::uuid, $2, $3, $4, $5, $6::jsonb, now())`,
  [AccountSchema],
);

/** $1 handle, $2 restricted, $3 listings paused, $4 max concurrent runs, $5 connections (JSON text), $6 account id. */
export const CATALOG_UPDATE_ACCOUNT = statement(
  'catalog_update_account',
  `update accounts set handle = $1, restricted = $2, listings_paused = $3, max_concurrent_runs = $4, connections = $5::jsonb where id = $6::uuid`,
  [AccountSchema],
);

/** A new account's wallet with its opening balance, the only money the catalog sets: $1 account id, $2 balance. */
export const CATALOG_OPEN_WALLET = statement(
  'catalog_open_wallet',
  `insert into wallets (account_id, balance_usd, held_usd, updated_at) values ($1::uuid, $2::numeric, 0, now())`,
  [WalletSchema],
);

/**
 * The opening balance's ledger row: $1 account id, $2 balance. Written from the account's wallet, as
 * every ledger row is written from the wallet it mirrors (the ledger has no foreign key to accounts).
 */
export const CATALOG_OPENING_CREDIT = statement(
  'catalog_opening_credit',
  `insert into ledger_entries (account_id, run_id, kind, amount_usd, balance_after_usd, note, created_at)
   select w.account_id, null, 'credit', $2::numeric, $2::numeric, 'opening balance from the catalog', now()
     from wallets w where w.account_id = $1::uuid`,
  [LedgerEntrySchema, WalletSchema],
);

/** A wallet for an existing account that lacks one, never touching a balance: $1 account id. */
export const CATALOG_ENSURE_WALLET = statement(
  'catalog_ensure_wallet',
  `insert into wallets (account_id, balance_usd, held_usd, updated_at) values ($1::uuid, 0, 0, now()) on conflict do nothing`,
  [WalletSchema],
);

/** $1 handle. */
export const CATALOG_ACCOUNT_ID_BY_HANDLE = statement('catalog_account_id_by_handle', `select id from accounts where handle = $1`, [AccountSchema]);

/** $1 account id, $2 provider. */
export const CATALOG_PROVIDER_KEY = statement(
  'catalog_provider_key',
  `select id, ciphertext from provider_keys where account_id = $1::uuid and provider = $2`,
  [ProviderKeySchema],
);

/** $1 id, $2 account id, $3 provider, $4 sealed key. */
export const CATALOG_INSERT_PROVIDER_KEY = statement(
  'catalog_insert_provider_key',
  `insert into provider_keys (id, account_id, provider, ciphertext, created_at) values ($1::uuid, $2::uuid, $3, $4, now())`,
  [ProviderKeySchema],
);

/** $1 sealed key, $2 provider key id. */
export const CATALOG_UPDATE_PROVIDER_KEY = statement('catalog_update_provider_key', `update provider_keys set ciphertext = $1 where id = $2::uuid`, [
  ProviderKeySchema,
]);

/** $1 key hash. */
export const CATALOG_API_KEY_BY_HASH = statement('catalog_api_key_by_hash', `select * from api_keys where key_hash = $1`, [ApiKeySchema]);

/** A new API key of the catalog (CATALOG_INSERT_API_KEY), by column; money as exact decimal text, the expiry as an ISO instant. */
export interface ApiKeyColumns {
  id: string;
  account_id: string;
  key_hash: string;
  prefix: string;
  scopes: readonly string[];
  rate_limit_per_minute: number;
  run_budget_per_minute: number;
  spend_cap_window: string | null;
  spend_cap_usd: string | null;
  expires_at: string | null;
  revoked: boolean;
}

/** $1 JSON: ApiKeyColumns. */
export const CATALOG_INSERT_API_KEY = statement(
  'catalog_insert_api_key',
  `insert into api_keys (id, account_id, key_hash, prefix, scopes, rate_limit_per_minute, spend_cap_window, spend_cap_usd, expires_at, revoked, created_at,
                         run_budget_per_minute)
   select k.id, k.account_id, k.key_hash, k.prefix, k.scopes, k.rate_limit_per_minute, k.spend_cap_window, k.spend_cap_usd, k.expires_at, k.revoked, now(),
          k.run_budget_per_minute
     from jsonb_to_record($1::jsonb)
          as k(id uuid, account_id uuid, key_hash text, prefix text, scopes jsonb, rate_limit_per_minute int, spend_cap_window text, spend_cap_usd numeric,
               expires_at timestamptz, revoked boolean, run_budget_per_minute int)`,
  [ApiKeySchema],
);

/** $1 scopes (JSON text), $2 rate limit per minute, $3 spend cap window, $4 spend cap, $5 expiry, $6 revoked, $7 API key id, $8 run budget per minute. */
export const CATALOG_UPDATE_API_KEY = statement(
  'catalog_update_api_key',
  `update api_keys set scopes = $1::jsonb, rate_limit_per_minute = $2, spend_cap_window = $3, spend_cap_usd = $4::numeric,
                       expires_at = $5::timestamptz, revoked = $6, run_budget_per_minute = $8
    where id = $7::uuid`,
  [ApiKeySchema],
);

/** $1 API key id, $2 may start high-priority runs, $3 bound per concurrency key or null (docs/design/flow-control.md). */
export const CATALOG_API_KEY_FLOW = statement(
  'catalog_api_key_flow',
  `update api_keys set high_priority = $2, max_concurrent_per_concurrency_key = $3::int where id = $1::uuid`,
  [ApiKeySchema],
);

/** $1 account id, $2 URL. */
export const CATALOG_WEBHOOK_ENDPOINT = statement(
  'catalog_webhook_endpoint',
  `select id, secret_ciphertext, events from webhook_endpoints where account_id = $1::uuid and url = $2`,
  [WebhookEndpointSchema],
);

/** $1 id, $2 account id, $3 URL, $4 sealed secret, $5 events (JSON text or null: every event). */
export const CATALOG_INSERT_WEBHOOK_ENDPOINT = statement(
  'catalog_insert_webhook_endpoint',
  `insert into webhook_endpoints (id, account_id, url, secret_ciphertext, events, created_at) values ($1::uuid, $2::uuid, $3, $4, $5::jsonb, now())`,
  [WebhookEndpointSchema],
);

/** $1 sealed secret, $2 events (JSON text or null), $3 endpoint id. */
export const CATALOG_UPDATE_WEBHOOK_ENDPOINT = statement(
  'catalog_update_webhook_endpoint',
  `update webhook_endpoints set secret_ciphertext = $1, events = $2::jsonb where id = $3::uuid`,
  [WebhookEndpointSchema],
);
