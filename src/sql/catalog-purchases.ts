import { statement } from '../db/statement.ts';
import { BundleSchema, PurchaseSchema } from '../db/entities/index.ts';

/**
 * The catalog loader's statements for purchases and bundles (src/catalog/load-catalog.ts): an existing
 * row is never changed by a reload (pins belong to the buyer, runs left are money state), so there is
 * only a lookup and an insert for each.
 */

/** $1 account id, $2 workflow id. */
export const CATALOG_PURCHASE = statement('catalog_purchase', `select id from purchases where account_id = $1::uuid and workflow_id = $2::uuid`, [
  PurchaseSchema,
]);

/** $1 id, $2 account id, $3 workflow id, $4 pinned version id. */
export const CATALOG_INSERT_PURCHASE = statement(
  'catalog_insert_purchase',
  `insert into purchases (id, account_id, workflow_id, version_id, created_at, updated_at) values ($1::uuid, $2::uuid, $3::uuid, $4::uuid, now(), now())`,
  [PurchaseSchema],
);

/** $1 account id, $2 workflow id, $3 version id. */
export const CATALOG_BUNDLE = statement(
  'catalog_bundle',
  `select id from bundles where account_id = $1::uuid and workflow_id = $2::uuid and version_id = $3::uuid`,
  [BundleSchema],
);

/** $1 id, $2 account id, $3 workflow id, $4 version id, $5 runs (total and left), $6 price per run. */
export const CATALOG_INSERT_BUNDLE = statement(
  'catalog_insert_bundle',
  `insert into bundles (id, account_id, workflow_id, version_id, runs_total, runs_left, usd_per_run, created_at)
   values ($1::uuid, $2::uuid, $3::uuid, $4::uuid, $5::int, $5::int, $6::numeric, now())`,
  [BundleSchema],
);
