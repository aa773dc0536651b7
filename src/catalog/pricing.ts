/**
 * Catalog pricing (docs/design/catalog.md). The type, the defaults and the settings-table storage live in
 * `src/services/pricing.ts`, which the billing code reads; the catalog loader writes it there in its
 * load transaction. Re-exported here so catalog code has one import site.
 */
export { DEFAULT_PRICING, PRICING_KEY, getPricing, readPricing, savePricing, type Pricing } from '../services/pricing.ts';
