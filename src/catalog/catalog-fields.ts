import { toDb } from '../domain/money.ts';
import type { Pricing } from './pricing.ts';
import type { CatalogWorkflow } from './schema.ts';
import type { WorkflowColumns } from '../sql/catalog-workflows.ts';

/** How the catalog loader compares and writes fields: money as stored, key prefixes, a workflow's columns. */

export const moneyOrNull = (v: unknown) => (v === null || v === undefined ? null : toDb(String(v)));

export function normalisePricing(p: Pricing): Pricing {
  return {
    stepUsd: toDb(p.stepUsd),
    models: Object.fromEntries(Object.entries(p.models).map(([m, v]) => [m, { input: toDb(v.input), output: toDb(v.output) }])),
  };
}

/** Up to 8 leading characters, never more than half the secret: enough to recognise, useless to guess. */
export function keyPrefix(secret: string): string {
  return secret.slice(0, Math.min(8, Math.floor(secret.length / 2)));
}

export function workflowFields(w: CatalogWorkflow, activeVersionId: string) {
  const columns: WorkflowColumns = {
    name: w.name,
    description: w.description,
    service_code: w.serviceCode,
    run_model: w.runModel,
    price_usd: w.priceUsd,
    listing: w.listing,
    unlock: w.unlock,
    api_access: w.apiAccess,
    credential_mode: w.credentialMode,
    compute_limit_usd: w.computeLimitUsd,
    active_version_id: activeVersionId,
  };
  return {
    columns,
    differsFrom(row: Record<string, unknown>): boolean {
      return (
        row.name !== w.name ||
        (row.description ?? null) !== w.description ||
        (row.service_code ?? null) !== w.serviceCode ||
        row.run_model !== w.runModel ||
        toDb(String(row.price_usd)) !== w.priceUsd ||
        row.listing !== w.listing ||
        Boolean(row.unlock) !== w.unlock ||
        Boolean(row.api_access) !== w.apiAccess ||
        row.credential_mode !== w.credentialMode ||
        moneyOrNull(row.compute_limit_usd) !== w.computeLimitUsd ||
        String(row.active_version_id ?? '') !== activeVersionId
      );
    },
  };
}
