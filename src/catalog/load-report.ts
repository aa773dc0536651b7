import type { Sealer } from '../security/crypto.ts';
import type { Pricing } from './pricing.ts';

/** What a catalog load (load-catalog.ts) reports: created, updated and unchanged rows per kind. */

export interface UpsertCounts {
  created: number;
  updated: number;
  unchanged: number;
}

export interface LoadReport {
  source: string;
  /** Totals over every kind of row below. */
  created: number;
  updated: number;
  unchanged: number;
  accounts: UpsertCounts;
  providerKeys: UpsertCounts;
  apiKeys: UpsertCounts;
  webhooks: UpsertCounts;
  workflows: UpsertCounts;
  versions: UpsertCounts;
  /** Existing pins are kept ("unchanged") even when the file names another version. */
  purchases: UpsertCounts;
  /** Existing bundles are kept as they are (runs left, price). */
  bundles: UpsertCounts;
  /** The pricing in force after the load (the file's, or the stored one when the file has none). */
  pricing: Pricing;
  pricingUpdated: boolean;
}

export interface LoadOptions {
  sealer: Sealer;
}
