import DataLoader from 'dataloader';
import type { Account, LedgerEntry, Purchase, RunEvent, Wallet, Workflow, WorkflowVersion } from '../db/entities/index.ts';
import type { Em } from '../db/orm.ts';
import type { Deps } from '../runs/deps.ts';
import type { RunQueue, RunRow } from '../runs/run-views.ts';
import { queueStates } from '../runs/queue-positions.ts';
import {
  accountsByHandles,
  accountsByIds,
  apiKeysByAccounts,
  ledgerForAccounts,
  purchasesByAccounts,
  walletsByAccounts,
  webhookDeliveriesForAccounts,
  webhookEndpointsByAccounts,
  type ApiKeyMetadata,
  type WebhookDeliveryView,
  type WebhookEndpointView,
} from './queries/accounts.ts';
import { childPageKey, type ChildPageKey } from './queries/pages.ts';
import { eventsForRuns, runsByIds, type RunRecord } from './queries/runs.ts';
import { versionsByIds, versionsForWorkflows, workflowsByIds } from './queries/workflows.ts';

/**
 * Per-request DataLoaders over the request's EntityManager: every relation and child list on the graph
 * is read through one of these, so a page of N runs costs one statement per relation, not N. A loader's
 * cache lives for one request (mutations clear the entries they change before reading them back).
 */

export interface Loaders {
  run: DataLoader<string, RunRecord | null>;
  runEvents: DataLoader<ChildPageKey, RunEvent[], string>;
  runQueue: DataLoader<RunRow, RunQueue | null, string>;
  workflow: DataLoader<string, Workflow | null>;
  version: DataLoader<string, WorkflowVersion | null>;
  workflowVersions: DataLoader<ChildPageKey, WorkflowVersion[], string>;
  account: DataLoader<string, Account | null>;
  accountByHandle: DataLoader<string, Account | null>;
  wallet: DataLoader<string, Wallet | null>;
  ledger: DataLoader<ChildPageKey, LedgerEntry[], string>;
  apiKeys: DataLoader<string, ApiKeyMetadata[]>;
  webhookEndpoints: DataLoader<string, WebhookEndpointView[]>;
  webhookDeliveries: DataLoader<ChildPageKey, WebhookDeliveryView[], string>;
  purchases: DataLoader<string, Purchase[]>;
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

export function createLoaders(deps: Pick<Deps, 'orm' | 'config'>, em: Em): Loaders {
  const none = () => null;
  const empty = <T>() => [] as T[];
  const webhookEndpoints = mapLoader<string, WebhookEndpointView[]>((ids) => webhookEndpointsByAccounts(em, ids), empty<WebhookEndpointView>);
  return {
    run: mapLoader((ids) => runsByIds(em, ids), none),
    runEvents: mapLoader((keys) => eventsForRuns(em, keys), empty<RunEvent>, childPageKey),
    runQueue: mapLoader(
      (rows) => queueStates(deps, rows),
      none,
      (r: RunRow) => r.id,
    ),
    workflow: mapLoader((ids) => workflowsByIds(em, ids), none),
    version: mapLoader((ids) => versionsByIds(em, ids), none),
    workflowVersions: mapLoader((keys) => versionsForWorkflows(em, keys), empty<WorkflowVersion>, childPageKey),
    account: mapLoader((ids) => accountsByIds(em, ids), none),
    accountByHandle: mapLoader((handles) => accountsByHandles(em, handles), none),
    wallet: mapLoader((ids) => walletsByAccounts(em, ids), none),
    ledger: mapLoader((keys) => ledgerForAccounts(em, keys), empty<LedgerEntry>, childPageKey),
    apiKeys: mapLoader((ids) => apiKeysByAccounts(em, ids), empty<ApiKeyMetadata>),
    webhookEndpoints,
    webhookDeliveries: mapLoader(
      async (keys) => {
        // A delivery belongs to its endpoint's account: the accounts' endpoints first (cached for the request).
        const endpoints = (await webhookEndpoints.loadMany([...new Set(keys.map((k) => k.parentId))])).flatMap((e) => (Array.isArray(e) ? e : []));
        return webhookDeliveriesForAccounts(em, keys, endpoints);
      },
      empty<WebhookDeliveryView>,
      childPageKey,
    ),
    purchases: mapLoader((ids) => purchasesByAccounts(em, ids), empty<Purchase>),
  };
}
