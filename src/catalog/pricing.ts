import { ShortLivedCache } from '../db/short-lived-cache.ts';
import type { Em } from '../db/orm.ts';
import { query, type StatementEm, type TransactionAwareEm } from '../db/statement.ts';
import { FIND_SETTING, SAVE_SETTING } from '../sql/settings.ts';

/** Service pricing from the catalog (docs/design/catalog.md), kept in `settings` so every process sees the same. */
export interface Pricing {
  stepUsd: string;
  /** USD per million tokens, by model name. */
  models: Record<string, { input: string; output: string }>;
}

export const DEFAULT_PRICING: Pricing = { stepUsd: '0.000100', models: {} };
export const PRICING_KEY = 'pricing';

/**
 * Pricing changes only when a catalog is loaded, and every run acceptance reads it, so each process
 * keeps it for a second (src/db/short-lived-cache.ts; a loader in this process invalidates it when it commits).
 */
const CACHE_MS = 1000;
const kept = new ShortLivedCache<Pricing>(CACHE_MS);

export async function getPricing(em: TransactionAwareEm): Promise<Pricing> {
  // A caller in a transaction reads on its own: a read shared with other callers must not run in it, and
  // waiting for one could wait on this very transaction (PGlite has one connection).
  if (em.isInTransaction()) return kept.peek(PRICING_KEY) ?? readPricing(em);
  return (await kept.get(PRICING_KEY, () => readPricing(em)))!;
}

/** The stored pricing, uncached (the catalog loader compares with this, not with the cache). */
export async function readPricing(em: StatementEm): Promise<Pricing> {
  const [row] = await query<{ value: unknown }>(em, FIND_SETTING, [PRICING_KEY]);
  if (!row) return DEFAULT_PRICING;
  const value = (typeof row.value === 'string' ? JSON.parse(row.value) : row.value) as Partial<Pricing>;
  return { stepUsd: value.stepUsd ?? DEFAULT_PRICING.stepUsd, models: value.models ?? {} };
}

/** Saves the pricing in `em`'s transaction; the caller calls `pricingCommitted` once that commits. */
export async function savePricing(em: Em, pricing: Pricing): Promise<void> {
  kept.drop();
  await query(em, SAVE_SETTING, [PRICING_KEY, JSON.stringify(pricing)]);
}

/** A saved pricing committed: what this process read meanwhile (the old pricing) is forgotten. */
export function pricingCommitted(): void {
  kept.drop();
}
