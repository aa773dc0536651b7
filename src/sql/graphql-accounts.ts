import { statement } from '../db/statement.ts';

/**
 * The internal GraphQL's reads of accounts and what hangs off them (src/graphql/queries/accounts.ts),
 * batched: each takes the ids of a batch as one array. Secrets are never selected (`key_hash`, webhook
 * secrets, delivery payloads). A page of children per parent ($2 offset, $3 limit) is cut with
 * row_number() over each parent's rows.
 */

const ACCOUNT = 'select id, handle, restricted, listings_paused, max_concurrent_runs, connections, created_at from accounts';

/** $1 account ids. */
export const GRAPHQL_ACCOUNTS_BY_IDS = statement('graphql_accounts_by_ids', `${ACCOUNT} where id = any($1::uuid[])`);

/** $1 handles. */
export const GRAPHQL_ACCOUNTS_BY_HANDLES = statement('graphql_accounts_by_handles', `${ACCOUNT} where handle = any($1::text[])`);

/** $1 account ids. */
export const GRAPHQL_WALLETS = statement(
  'graphql_wallets',
  `select account_id, balance_usd, held_usd, updated_at from wallets where account_id = any($1::uuid[])`,
);

/** Newest first: $1 account ids, $2 offset, $3 limit (per account). */
export const GRAPHQL_LEDGER_PAGES = statement(
  'graphql_ledger_pages',
  `select * from (
     select id, account_id, run_id, kind, amount_usd, balance_after_usd, note, created_at,
            row_number() over (partition by account_id order by id desc) as rn
       from ledger_entries where account_id = any($1::uuid[])
   ) x where rn > $2::bigint and rn <= $2::bigint + $3::bigint order by account_id, rn`,
);

/** Metadata only, oldest first: $1 account ids. */
export const GRAPHQL_API_KEYS = statement(
  'graphql_api_keys',
  `select id, account_id, prefix, scopes, rate_limit_per_minute, spend_cap_window, spend_cap_usd, expires_at, revoked, created_at
     from api_keys where account_id = any($1::uuid[]) order by created_at asc, id asc`,
);

/** Oldest first: $1 account ids. */
export const GRAPHQL_WEBHOOK_ENDPOINTS = statement(
  'graphql_webhook_endpoints',
  `select id, account_id, url, events, created_at from webhook_endpoints
    where account_id = any($1::uuid[]) order by created_at asc, id asc`,
);

/** Newest first: $1 account ids, $2 offset, $3 limit (per account). */
export const GRAPHQL_WEBHOOK_DELIVERY_PAGES = statement(
  'graphql_webhook_delivery_pages',
  `select * from (
     select d.id, d.endpoint_id, e.url as endpoint_url, e.account_id, d.run_id, d.event_type, d.status, d.attempts,
            d.next_attempt_at, d.last_status_code, d.last_error, d.created_at, d.delivered_at,
            row_number() over (partition by e.account_id order by d.created_at desc, d.id desc) as rn
       from webhook_deliveries d join webhook_endpoints e on e.id = d.endpoint_id
      where e.account_id = any($1::uuid[])
   ) x where rn > $2::bigint and rn <= $2::bigint + $3::bigint order by account_id, rn`,
);

/** Oldest first: $1 account ids. */
export const GRAPHQL_PURCHASES = statement(
  'graphql_purchases',
  `select p.account_id, p.workflow_id, p.version_id, w.active_version_id, p.created_at, p.updated_at
     from purchases p join workflows w on w.id = p.workflow_id
    where p.account_id = any($1::uuid[]) order by p.created_at asc, p.id asc`,
);
