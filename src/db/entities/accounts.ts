import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { createdAt, money } from './columns.ts';

/** Accounts, their API keys and what a key is limited by (rate windows, open streams), and provider keys. The model as a whole: ./index.ts. */

export const AccountSchema = defineEntity({
  name: 'Account',
  tableName: 'accounts',
  properties: {
    id: p.uuid().primary(),
    handle: p.string().unique(),
    restricted: p.boolean().default(false),
    listingsPaused: p.boolean().default(false),
    maxConcurrentRuns: p.integer().nullable(),
    connections: p.json<string[]>().default('[]').onCreate(() => []),
    createdAt: createdAt(),
  },
});
export type Account = InferEntity<typeof AccountSchema>;

export const SPEND_WINDOWS = ['daily', 'monthly', 'lifetime'] as const;
export type SpendWindow = (typeof SPEND_WINDOWS)[number];

export const ApiKeySchema = defineEntity({
  name: 'ApiKey',
  tableName: 'api_keys',
  properties: {
    id: p.uuid().primary(),
    accountId: p.manyToOne(AccountSchema).mapToPk().fieldName('account_id').deleteRule('cascade'),
    /** sha256 of the secret, hex; the secret itself is never stored. */
    keyHash: p.string().length(64).unique(),
    /** First characters of the secret, to recognise a key in a console without revealing it. */
    prefix: p.string().length(16),
    scopes: p.json<string[]>(),
    rateLimitPerMinute: p.integer().default(60),
    spendCapWindow: p.enum(SPEND_WINDOWS).nullable(),
    spendCapUsd: money().nullable(),
    expiresAt: p.datetime().nullable(),
    revoked: p.boolean().default(false),
    createdAt: createdAt(),
  },
});
export type ApiKey = InferEntity<typeof ApiKeySchema>;

/**
 * The POST /runs sliding window of one API key, shared by every API process on the database: the
 * requests counted in each of the last 60 seconds (src/sql/rate-windows.ts). One row per key, so
 * concurrent requests for a key serialise on it.
 */
export const ApiKeyRateWindowSchema = defineEntity({
  name: 'ApiKeyRateWindow',
  tableName: 'api_key_rate_windows',
  properties: {
    apiKeyId: p.manyToOne(ApiKeySchema).mapToPk().fieldName('api_key_id').primary().deleteRule('cascade'),
    /** Epoch second of the newest bucket (`counts[60]`). */
    second: p.bigint('number'),
    /** Requests counted per second, oldest first: `counts[i]` for the second `second - 60 + i`. */
    counts: p.array<number>().columnType('int[]'),
    /** The sum of `counts`, kept with them. */
    total: p.integer().default(0),
    /** The `second` `total` was kept for; another (a row an older version wrote) has its total added up again. */
    totalSecond: p.bigint('number').nullable(),
    /** Whether the last request was counted (false: it was refused with 429). */
    allowed: p.boolean(),
    /** How many requests the last count allowed (one statement counts a batch's requests of the key together). */
    lastCounted: p.integer().default(0),
  },
});
export type ApiKeyRateWindow = InferEntity<typeof ApiKeyRateWindowSchema>;

/** Open streams per holder across processes (src/services/streams/stream-slots.ts). */
export const StreamSlotTotalSchema = defineEntity({
  name: 'StreamSlotTotal',
  tableName: 'stream_slot_totals',
  properties: {
    holder: p.string().primary(),
    open: p.integer(),
  },
});

/** What one process holds of a holder's open streams, under a lease it renews. */
export const StreamSlotLeaseSchema = defineEntity({
  name: 'StreamSlotLease',
  tableName: 'stream_slot_leases',
  properties: {
    holder: p.string().primary(),
    processId: p.string().primary(),
    open: p.integer(),
    leaseUntil: p.datetime(),
  },
  indexes: [
    { name: 'stream_slot_leases_process_idx', properties: ['processId'] },
    { name: 'stream_slot_leases_lease_idx', properties: ['leaseUntil'] },
  ],
});

export const ProviderKeySchema = defineEntity({
  name: 'ProviderKey',
  tableName: 'provider_keys',
  properties: {
    id: p.uuid().primary(),
    accountId: p.manyToOne(AccountSchema).mapToPk().fieldName('account_id').deleteRule('cascade'),
    provider: p.string(),
    /** AES-256-GCM ciphertext (see src/security/crypto.ts). */
    ciphertext: p.text(),
    createdAt: createdAt(),
  },
  uniques: [{ properties: ['accountId', 'provider'] }],
});
export type ProviderKey = InferEntity<typeof ProviderKeySchema>;
