import DataLoader from 'dataloader';
import type { Em } from '../db/orm.ts';
import { fork, type Deps } from '../services/deps.ts';
import type { PublicRunEvent, RunQueue, RunRow } from '../services/runs/run-views.ts';
import {
  accountsByHandles,
  accountsByIds,
  apiKeysByAccounts,
  ledgerForAccounts,
  purchasesByAccounts,
  walletsByAccounts,
  webhookDeliveriesForAccounts,
  webhookEndpointsByAccounts,
  type AccountRecord,
  type ApiKeyRecord,
  type LedgerEntryRecord,
  type PurchaseRecord,
  type WalletRecord,
  type WebhookDeliveryRecord,
  type WebhookEndpointRecord,
} from './queries/accounts.ts';
import { eventsForRuns, runsByIds, type RunRecord } from './queries/runs.ts';
import { queueStates } from '../services/runs/queue-positions.ts';
import { childPageKey, type ChildPageKey } from './queries/sql.ts';
import { versionsByIds, versionsForWorkflows, workflowsByIds, type WorkflowRecord, type WorkflowVersionRecord } from './queries/workflows.ts';

/**
 * Per-request DataLoaders: every relation and child list on the graph is read through one of these,
 * so a page of N runs costs one query per relation, not N. A loader's cache lives for one request
 * (mutations clear the entries they change before reading them back).
 */

export interface Loaders {
  run: DataLoader<string, RunRecord | null>;
  runEvents: DataLoader<ChildPageKey, PublicRunEvent[], string>;
  runQueue: DataLoader<RunRow, RunQueue | null, string>;
  workflow: DataLoader<string, WorkflowRecord | null>;
  version: DataLoader<string, WorkflowVersionRecord | null>;
  workflowVersions: DataLoader<ChildPageKey, WorkflowVersionRecord[], string>;
  account: DataLoader<string, AccountRecord | null>;
  accountByHandle: DataLoader<string, AccountRecord | null>;
  wallet: DataLoader<string, WalletRecord | null>;
  ledger: DataLoader<ChildPageKey, LedgerEntryRecord[], string>;
  apiKeys: DataLoader<string, ApiKeyRecord[]>;
  webhookEndpoints: DataLoader<string, WebhookEndpointRecord[]>;
  webhookDeliveries: DataLoader<ChildPageKey, WebhookDeliveryRecord[], string>;
  purchases: DataLoader<string, PurchaseRecord[]>;
}

/** A loader over a batch function that answers a Map keyed like the loader. */
function mapLoader<K, V, C = K>(batch: (keys: readonly K[]) => Promise<Map<C, V>>, fallback: () => V, cacheKeyFn?: (k: K) => C) {
  const keyOf = cacheKeyFn ?? ((k: K) => k as unknown as C);
  return new DataLoader<K, V, C>(
    async (keys) => {
      const found = await batch(keys);
      return keys.map((k) => found.get(keyOf(k)) ?? fallback());
    },
    { cacheKeyFn, maxBatchSize: 500 },
  );
}

export function createLoaders(deps: Deps): Loaders {
  // One entity manager per request: reads only, raw SQL, no identity map involved.
  const em: Em = fork(deps);
  const none = () => null;
  const empty = <T>() => [] as T[];
  return {
    run: mapLoader((ids) => runsByIds(em, ids), none),
    runEvents: mapLoader((keys) => eventsForRuns(em, keys), empty<PublicRunEvent>, childPageKey),
    runQueue: mapLoader((rows) => queueStates(deps, rows), none, (r: RunRow) => r.id),
    workflow: mapLoader((ids) => workflowsByIds(em, ids), none),
    version: mapLoader((ids) => versionsByIds(em, ids), none),
    workflowVersions: mapLoader((keys) => versionsForWorkflows(em, keys), empty<WorkflowVersionRecord>, childPageKey),
    account: mapLoader((ids) => accountsByIds(em, ids), none),
    accountByHandle: mapLoader((handles) => accountsByHandles(em, handles), none),
    wallet: mapLoader((ids) => walletsByAccounts(em, ids), none),
    ledger: mapLoader((keys) => ledgerForAccounts(em, keys), empty<LedgerEntryRecord>, childPageKey),
    apiKeys: mapLoader((ids) => apiKeysByAccounts(em, ids), empty<ApiKeyRecord>),
    webhookEndpoints: mapLoader((ids) => webhookEndpointsByAccounts(em, ids), empty<WebhookEndpointRecord>),
    webhookDeliveries: mapLoader((keys) => webhookDeliveriesForAccounts(em, keys), empty<WebhookDeliveryRecord>, childPageKey),
    purchases: mapLoader((ids) => purchasesByAccounts(em, ids), empty<PurchaseRecord>),
  };
}
