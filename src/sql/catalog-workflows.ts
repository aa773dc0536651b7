import { statement } from '../db/statement.ts';
import { WorkflowSchema, WorkflowVersionSchema } from '../db/entities/index.ts';

/**
 * The catalog loader's statements for workflows and their versions (src/catalog/load-catalog.ts):
 * tables `workflows` and `workflow_versions`. Versions are immutable: they are inserted, never updated.
 */

/** $1 workflow id. */
export const CATALOG_WORKFLOW_BY_ID = statement('catalog_workflow_by_id', `select * from workflows where id = $1::uuid`, [WorkflowSchema]);

/** $1 owner id, $2 name: every match, so that a name given twice is reported. */
export const CATALOG_WORKFLOWS_BY_NAME = statement(
  'catalog_workflows_by_name',
  `select * from workflows where owner_id = $1::uuid and name = $2 order by created_at, id`,
  [WorkflowSchema],
);

/** $1 workflow id. */
export const CATALOG_WORKFLOW_ID = statement('catalog_workflow_id', `select id from workflows where id = $1::uuid`, [WorkflowSchema]);

/**
 * $1 id, $2 owner id, then the fields of catalog-fields.ts `workflowFields`: $3 name, $4 description,
 * $5 service code, $6 run model, $7 price, $8 listing, $9 unlock, $10 API access, $11 credential mode,
 * $12 compute limit, $13 active version id.
 */
export const CATALOG_INSERT_WORKFLOW = statement(
  'catalog_insert_workflow',
  `insert into workflows (id, owner_id, name, description, service_code, run_model, price_usd, listing, unlock, api_access,
                          credential_mode, compute_limit_usd, active_version_id, runs_count, created_at)
   values ($1::uuid, $2::uuid, $3, $4, $5, $6, $7::numeric, $8, $9, $10, $11, $12::numeric, $13::uuid, 0, now())`,
  [WorkflowSchema],
);

/** $1–$11 the fields of `workflowFields` (as CATALOG_INSERT_WORKFLOW's $3–$13), $12 workflow id. */
export const CATALOG_UPDATE_WORKFLOW = statement(
  'catalog_update_workflow',
  `update workflows set name = $1, description = $2, service_code = $3, run_model = $4, price_usd = $5::numeric, listing = $6, unlock = $7,
                        api_access = $8, credential_mode = $9, compute_limit_usd = $10::numeric, active_version_id = $11::uuid
    where id = $12::uuid`,
  [WorkflowSchema],
);

/** A workflow's stored versions: $1 workflow id. */
export const CATALOG_VERSIONS_OF_WORKFLOW = statement(
  'catalog_versions_of_workflow',
  `select id, workflow_id, label, graph_hash from workflow_versions where workflow_id = $1::uuid`,
  [WorkflowVersionSchema],
);

/** $1 version id. */
export const CATALOG_VERSION_BY_ID = statement(
  'catalog_version_by_id',
  `select id, workflow_id, label, graph_hash from workflow_versions where id = $1::uuid`,
  [WorkflowVersionSchema],
);

/** A version of workflow $1 by its id $2. */
export const CATALOG_VERSION_ID = statement('catalog_version_id', `select id from workflow_versions where workflow_id = $1::uuid and id = $2::uuid`, [
  WorkflowVersionSchema,
]);

/** A version of workflow $1 by its label $2. */
export const CATALOG_VERSION_ID_BY_LABEL = statement(
  'catalog_version_id_by_label',
  `select id from workflow_versions where workflow_id = $1::uuid and label = $2`,
  [WorkflowVersionSchema],
);

/**
 * $1 id, $2 workflow id, $3 label, $4 graph (JSON text), $5 graph hash. One by one, in the file's order,
 * so that created_at orders a workflow's versions as listed (newest last).
 */
export const CATALOG_INSERT_VERSION = statement(
  'catalog_insert_version',
  `insert into workflow_versions (id, workflow_id, label, graph, graph_hash, created_at) values ($1::uuid, $2::uuid, $3, $4::jsonb, $5, clock_timestamp())`,
  [WorkflowVersionSchema],
);
