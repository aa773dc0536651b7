import type { Em } from '../../db/orm.ts';
import { query } from '../../db/statement.ts';
import {
  GRAPHQL_ACCOUNTS_BY_HANDLES,
  GRAPHQL_ACCOUNTS_BY_IDS,
  GRAPHQL_API_KEYS,
  GRAPHQL_LEDGER_PAGES,
  GRAPHQL_PURCHASES,
  GRAPHQL_WALLETS,
  GRAPHQL_WEBHOOK_DELIVERY_PAGES,
  GRAPHQL_WEBHOOK_ENDPOINTS,
} from '../../sql/graphql-accounts.ts';
import { groupPages, iso, isoOrNull, json, str, strOrNull, uuids, type ChildPageKey } from './sql.ts';

/**
 * Internal reads of accounts and what hangs off them: wallet, ledger, API key metadata, webhook
 * endpoints and deliveries, purchases. Secrets never leave the database through here: API keys expose
 * their prefix and settings (never `key_hash`), webhooks their URL (never the secret), deliveries their
 * status (never the signed payload).
 */

export interface AccountRecord {
  id: string;
  handle: string;
  restricted: boolean;
  listingsPaused: boolean;
  maxConcurrentRuns: number | null;
  connections: string[];
  createdAt: string;
}

export interface WalletRecord {
  balanceUsd: string;
  heldUsd: string;
  updatedAt: string;
}

export interface LedgerEntryRecord {
  id: string;
  runId: string | null;
  kind: string;
  amountUsd: string;
  balanceAfterUsd: string;
  note: string | null;
  createdAt: string;
}

export interface ApiKeyRecord {
  id: string;
  prefix: string;
  scopes: string[];
  rateLimitPerMinute: number;
  spendCap: { window: string; usd: string } | null;
  expiresAt: string | null;
  revoked: boolean;
  createdAt: string;
}

export interface WebhookEndpointRecord {
  id: string;
  url: string;
  events: string[] | null;
  createdAt: string;
}

export interface WebhookDeliveryRecord {
  id: string;
  endpointId: string;
  endpointUrl: string;
  runId: string;
  eventType: string;
  status: string;
  attempts: number;
  nextAttemptAt: string;
  lastStatusCode: number | null;
  lastError: string | null;
  createdAt: string;
  deliveredAt: string | null;
}

export interface PurchaseRecord {
  workflowId: string;
  pinnedVersionId: string;
  activeVersionId: string | null;
  updateAvailable: boolean;
  createdAt: string;
  updatedAt: string;
}

function toAccount(r: Record<string, unknown>): AccountRecord {
  return {
    id: str(r.id),
    handle: str(r.handle),
    restricted: Boolean(r.restricted),
    listingsPaused: Boolean(r.listings_paused),
    maxConcurrentRuns: r.max_concurrent_runs === null || r.max_concurrent_runs === undefined ? null : Number(r.max_concurrent_runs),
    connections: json<string[]>(r.connections ?? '[]'),
    createdAt: iso(r.created_at),
  };
}

export async function accountsByIds(em: Em, ids: readonly string[]): Promise<Map<string, AccountRecord>> {
  const wanted = uuids(ids);
  if (!wanted.length) return new Map();
  const rows = await query(em, GRAPHQL_ACCOUNTS_BY_IDS, [wanted]);
  return new Map(rows.map((r) => [String(r.id), toAccount(r)]));
}

export async function accountsByHandles(em: Em, handles: readonly string[]): Promise<Map<string, AccountRecord>> {
  const wanted = [...new Set(handles)];
  if (!wanted.length) return new Map();
  const rows = await query(em, GRAPHQL_ACCOUNTS_BY_HANDLES, [wanted]);
  return new Map(rows.map((r) => [String(r.handle), toAccount(r)]));
}

export async function walletsByAccounts(em: Em, accountIds: readonly string[]): Promise<Map<string, WalletRecord>> {
  const wanted = uuids(accountIds);
  if (!wanted.length) return new Map();
  const rows = await query(em, GRAPHQL_WALLETS, [wanted]);
  return new Map(
    rows.map((r) => [String(r.account_id), { balanceUsd: str(r.balance_usd), heldUsd: str(r.held_usd), updatedAt: iso(r.updated_at) }]),
  );
}

/** Newest first. */
export async function ledgerForAccounts(em: Em, keys: readonly ChildPageKey[]): Promise<Map<string, LedgerEntryRecord[]>> {
  const out = new Map<string, LedgerEntryRecord[]>();
  for (const g of groupPages(keys)) {
    if (!g.parentIds.length) continue;
    const rows = await query(em, GRAPHQL_LEDGER_PAGES, [g.parentIds, g.offset, g.limit]);
    for (const r of rows) {
      const key = `${String(r.account_id)}|${g.offset}|${g.limit}`;
      out.set(key, [
        ...(out.get(key) ?? []),
        {
          id: str(r.id),
          runId: strOrNull(r.run_id),
          kind: str(r.kind),
          amountUsd: str(r.amount_usd),
          balanceAfterUsd: str(r.balance_after_usd),
          note: strOrNull(r.note),
          createdAt: iso(r.created_at),
        },
      ]);
    }
  }
  return out;
}

/** Metadata only: the hash of the secret is not even selected. */
export async function apiKeysByAccounts(em: Em, accountIds: readonly string[]): Promise<Map<string, ApiKeyRecord[]>> {
  const wanted = uuids(accountIds);
  const out = new Map<string, ApiKeyRecord[]>();
  if (!wanted.length) return out;
  const rows = await query(em, GRAPHQL_API_KEYS, [wanted]);
  for (const r of rows) {
    const key = String(r.account_id);
    out.set(key, [
      ...(out.get(key) ?? []),
      {
        id: str(r.id),
        prefix: str(r.prefix),
        scopes: json<string[]>(r.scopes),
        rateLimitPerMinute: Number(r.rate_limit_per_minute),
        spendCap: r.spend_cap_window ? { window: str(r.spend_cap_window), usd: str(r.spend_cap_usd) } : null,
        expiresAt: isoOrNull(r.expires_at),
        revoked: Boolean(r.revoked),
        createdAt: iso(r.created_at),
      },
    ]);
  }
  return out;
}

export async function webhookEndpointsByAccounts(em: Em, accountIds: readonly string[]): Promise<Map<string, WebhookEndpointRecord[]>> {
  const wanted = uuids(accountIds);
  const out = new Map<string, WebhookEndpointRecord[]>();
  if (!wanted.length) return out;
  const rows = await query(em, GRAPHQL_WEBHOOK_ENDPOINTS, [wanted]);
  for (const r of rows) {
    const key = String(r.account_id);
    const events = r.events === null || r.events === undefined ? null : json<string[] | null>(r.events);
    out.set(key, [...(out.get(key) ?? []), { id: str(r.id), url: str(r.url), events, createdAt: iso(r.created_at) }]);
  }
  return out;
}

/** Newest first. */
export async function webhookDeliveriesForAccounts(em: Em, keys: readonly ChildPageKey[]): Promise<Map<string, WebhookDeliveryRecord[]>> {
  const out = new Map<string, WebhookDeliveryRecord[]>();
  for (const g of groupPages(keys)) {
    if (!g.parentIds.length) continue;
    const rows = await query(em, GRAPHQL_WEBHOOK_DELIVERY_PAGES, [g.parentIds, g.offset, g.limit]);
    for (const r of rows) {
      const key = `${String(r.account_id)}|${g.offset}|${g.limit}`;
      out.set(key, [
        ...(out.get(key) ?? []),
        {
          id: str(r.id),
          endpointId: str(r.endpoint_id),
          endpointUrl: str(r.endpoint_url),
          runId: str(r.run_id),
          eventType: str(r.event_type),
          status: str(r.status),
          attempts: Number(r.attempts ?? 0),
          nextAttemptAt: iso(r.next_attempt_at),
          lastStatusCode: r.last_status_code === null || r.last_status_code === undefined ? null : Number(r.last_status_code),
          lastError: strOrNull(r.last_error),
          createdAt: iso(r.created_at),
          deliveredAt: isoOrNull(r.delivered_at),
        },
      ]);
    }
  }
  return out;
}

export async function purchasesByAccounts(em: Em, accountIds: readonly string[]): Promise<Map<string, PurchaseRecord[]>> {
  const wanted = uuids(accountIds);
  const out = new Map<string, PurchaseRecord[]>();
  if (!wanted.length) return out;
  const rows = await query(em, GRAPHQL_PURCHASES, [wanted]);
  for (const r of rows) {
    const key = String(r.account_id);
    const active = strOrNull(r.active_version_id);
    out.set(key, [
      ...(out.get(key) ?? []),
      {
        workflowId: str(r.workflow_id),
        pinnedVersionId: str(r.version_id),
        activeVersionId: active,
        updateAvailable: active !== null && active !== str(r.version_id),
        createdAt: iso(r.created_at),
        updatedAt: iso(r.updated_at),
      },
    ]);
  }
  return out;
}
