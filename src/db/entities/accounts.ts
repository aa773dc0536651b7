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
    connections: p
      .json<string[]>()
      .default('[]')
      .onCreate(() => []),
    createdAt: createdAt(),
  },
});
export type Account = InferEntity<typeof AccountSchema>;

export const SPEND_WINDOWS = ['daily', 'monthly', 'lifetime'] as const;
export type SpendWindow = (typeof SPEND_WINDOWS)[number];

/** The run budget of a key the catalog gives none: ten 1,000-run batches a minute (docs/design/batch-runs.md#run-budget). */
export const RUN_BUDGET_PER_MINUTE = 10_000;

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
    /** Runs a minute the key's batches may start (docs/design/batch-runs.md#run-budget). */
    runBudgetPerMinute: p.integer().default(RUN_BUDGET_PER_MINUTE),
    /** Whether the key may start runs of high priority (docs/design/flow-control.md). */
    highPriority: p.boolean().default(false),
    /** Runs of one concurrency key in flight at once, or null: no bound (a request may lower it). */
    maxConcurrentPerConcurrencyKey: p.integer().nullable(),
    spendCapWindow: p.enum(SPEND_WINDOWS).nullable(),
    spendCapUsd: money().nullable(),
    expiresAt: p.datetime().nullable(),
    revoked: p.boolean().default(false),
    createdAt: createdAt(),
  },
});
export type ApiKey = InferEntity<typeof ApiKeySchema>;

/** The columns of a per-key sliding window of 60 one-second buckets (requests, or a batch's runs). */
const windowColumns = () => ({
  apiKeyId: p.manyToOne(ApiKeySchema).mapToPk().fieldName('api_key_id').primary().deleteRule('cascade'),
  /** Epoch second of the newest bucket (`counts[60]`). */
  second: p.bigint('number'),
  /** What was counted per second, oldest first: `counts[i]` for the second `second - 60 + i`. */
  counts: p.array<number>().columnType('int[]'),
  /** The sum of `counts`, kept with them. */
  total: p.integer().default(0),
  /** The `second` `total` was kept for; another (a row an older version wrote) has its total added up again. */
  totalSecond: p.bigint('number').nullable(),
  /** Whether the last count was allowed (false: it was refused with 429). */
  allowed: p.boolean(),
});

/**
 * The POST /runs sliding window of one API key, shared by every API process on the database: the
 * requests counted in each of the last 60 seconds (src/sql/rate-windows.ts). One row per key, so
 * concurrent requests for a key serialise on it.
 */
export const ApiKeyRateWindowSchema = defineEntity({
  name: 'ApiKeyRateWindow',
  tableName: 'api_key_rate_windows',
  properties: {
    ...windowColumns(),
    /** How many requests the last count allowed (one statement counts a batch's requests of the key together). */
    lastCounted: p.integer().default(0),
  },
});
export type ApiKeyRateWindow = InferEntity<typeof ApiKeyRateWindowSchema>;

/**
 * The run budget of one API key, shared by every API process on the database: the runs its batches
 * started in each of the last 60 seconds (src/sql/run-budget.ts), shaped like its request window.
 */
export const ApiKeyRunWindowSchema = defineEntity({
  name: 'ApiKeyRunWindow',
  tableName: 'api_key_run_windows',
  properties: windowColumns(),
});
export type ApiKeyRunWindow = InferEntity<typeof ApiKeyRunWindowSchema>;

/** Open streams per holder across processes (src/runs/stream-slots.ts). */
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
