import type { Em } from '../../db/orm.ts';
import {
  AccountSchema,
  ApiKeySchema,
  LedgerEntrySchema,
  PurchaseSchema,
  WalletSchema,
  WebhookDeliverySchema,
  WebhookEndpointSchema,
  type Account,
  type ApiKey,
  type LedgerEntry,
  type Purchase,
  type Wallet,
  type WebhookDelivery,
  type WebhookEndpoint,
} from '../../db/entities/index.ts';
import { groupPages, pagesOf, pushTo, uuids, type ChildPageKey } from './pages.ts';

/**
 * Internal reads of accounts and what hangs off them, through their entities: wallet, ledger, API key
 * metadata, webhook endpoints and deliveries, purchases. Secrets never leave the database through here:
 * API keys are read without `keyHash`, webhook endpoints without their secret.
 */

/** API key metadata: every property but the hash. */
export type ApiKeyMetadata = Omit<ApiKey, 'keyHash'>;
/** A webhook endpoint without its secret. */
export type WebhookEndpointView = Omit<WebhookEndpoint, 'secretCiphertext'>;
/** A webhook delivery with its endpoint's URL. */
export type WebhookDeliveryView = WebhookDelivery & { endpointUrl: string };

const API_KEY_FIELDS = [
  'id',
  'accountId',
  'prefix',
  'scopes',
  'rateLimitPerMinute',
  'spendCapWindow',
  'spendCapUsd',
  'expiresAt',
  'revoked',
  'createdAt',
] as const satisfies readonly (keyof ApiKey)[];
const ENDPOINT_FIELDS = ['id', 'accountId', 'url', 'events', 'createdAt'] as const satisfies readonly (keyof WebhookEndpoint)[];
const DELIVERY_FIELDS = [
  'id',
  'endpointId',
  'runId',
  'eventType',
  'status',
  'attempts',
  'nextAttemptAt',
  'lastStatusCode',
  'lastError',
  'createdAt',
  'deliveredAt',
] as const satisfies readonly (keyof WebhookDelivery)[];

export async function accountsByIds(em: Em, ids: readonly string[]): Promise<Map<string, Account>> {
  const wanted = uuids(ids);
  if (!wanted.length) return new Map();
  const accounts = await em.find(AccountSchema, { id: { $in: wanted } });
  return new Map(accounts.map((a) => [a.id, a]));
}

export async function accountsByHandles(em: Em, handles: readonly string[]): Promise<Map<string, Account>> {
  const wanted = [...new Set(handles)];
  if (!wanted.length) return new Map();
  const accounts = await em.find(AccountSchema, { handle: { $in: wanted } });
  return new Map(accounts.map((a) => [a.handle, a]));
}

export async function walletsByAccounts(em: Em, accountIds: readonly string[]): Promise<Map<string, Wallet>> {
  const wanted = uuids(accountIds);
  if (!wanted.length) return new Map();
  const wallets = await em.find(WalletSchema, { accountId: { $in: wanted } });
  return new Map(wallets.map((w) => [w.accountId, w]));
}

/** Newest first. */
export async function ledgerForAccounts(em: Em, keys: readonly ChildPageKey[]): Promise<Map<string, LedgerEntry[]>> {
  const out = new Map<string, LedgerEntry[]>();
  for (const g of groupPages(keys)) {
    if (!g.parentIds.length) continue;
    const entries = await pagesOf(em, {
      entity: LedgerEntrySchema,
      where: { accountId: { $in: g.parentIds } },
      partition: 'c.account_id',
      order: { id: 'desc' },
      after: g.offset,
      upTo: g.offset + g.limit,
    });
    for (const e of entries) pushTo(out, `${e.accountId}|${g.offset}|${g.limit}`, e);
  }
  return out;
}

/** Oldest first, without the hash of the secret. */
export async function apiKeysByAccounts(em: Em, accountIds: readonly string[]): Promise<Map<string, ApiKeyMetadata[]>> {
  const wanted = uuids(accountIds);
  const out = new Map<string, ApiKeyMetadata[]>();
  if (!wanted.length) return out;
  const keys = await em.find(ApiKeySchema, { accountId: { $in: wanted } }, { fields: API_KEY_FIELDS, orderBy: { createdAt: 'asc', id: 'asc' } });
  for (const k of keys) pushTo(out, k.accountId, k as ApiKeyMetadata);
  return out;
}

/** Oldest first, without their secrets. */
export async function webhookEndpointsByAccounts(em: Em, accountIds: readonly string[]): Promise<Map<string, WebhookEndpointView[]>> {
  const wanted = uuids(accountIds);
  const out = new Map<string, WebhookEndpointView[]>();
  if (!wanted.length) return out;
  const endpoints = await em.find(WebhookEndpointSchema, { accountId: { $in: wanted } }, { fields: ENDPOINT_FIELDS, orderBy: { createdAt: 'asc', id: 'asc' } });
  for (const e of endpoints) pushTo(out, e.accountId, e as WebhookEndpointView);
  return out;
}

/**
 * Newest first. `endpoints` are the accounts' endpoints (read first: a
 * delivery's account is its endpoint's).
 */
export async function webhookDeliveriesForAccounts(
  em: Em,
  keys: readonly ChildPageKey[],
  endpoints: readonly WebhookEndpointView[],
): Promise<Map<string, WebhookDeliveryView[]>> {
  const out = new Map<string, WebhookDeliveryView[]>();
  const byId = new Map(endpoints.map((e) => [e.id, e]));
  for (const g of groupPages(keys)) {
    const parents = new Set(g.parentIds);
    const endpointIds = endpoints.filter((e) => parents.has(e.accountId)).map((e) => e.id);
    if (!endpointIds.length) continue;
    const deliveries = await pagesOf(em, {
      entity: WebhookDeliverySchema,
      where: { endpointId: { $in: endpointIds } },
      partition: '(select e.account_id from webhook_endpoints e where e.id = c.endpoint_id)',
      order: { createdAt: 'desc', id: 'desc' },
      fields: DELIVERY_FIELDS,
      after: g.offset,
      upTo: g.offset + g.limit,
    });
    for (const d of deliveries) {
      const endpoint = byId.get(d.endpointId)!;
      pushTo(out, `${endpoint.accountId}|${g.offset}|${g.limit}`, { ...d, endpointUrl: endpoint.url });
    }
  }
  return out;
}

/** Oldest first. */
export async function purchasesByAccounts(em: Em, accountIds: readonly string[]): Promise<Map<string, Purchase[]>> {
  const wanted = uuids(accountIds);
  const out = new Map<string, Purchase[]>();
  if (!wanted.length) return out;
  const purchases = await em.find(PurchaseSchema, { accountId: { $in: wanted } }, { orderBy: { createdAt: 'asc', id: 'asc' } });
  for (const p of purchases) pushTo(out, p.accountId, p);
  return out;
}
