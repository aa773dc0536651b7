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

/** The columns of a workflow the catalog sets (src/catalog/catalog-fields.ts `workflowFields`), by name; money as exact decimal text. */
export interface WorkflowColumns {
  name: string;
  description: string | null;
  service_code: string | null;
  run_model: string;
  price_usd: string;
  listing: string;
  unlock: boolean;
  api_access: boolean;
  credential_mode: string;
  compute_limit_usd: string | null;
  active_version_id: string;
}

/** WorkflowColumns as the columns of `jsonb_to_record`. */
const WORKFLOW_COLUMNS = `name text, description text, service_code text, run_model text, price_usd numeric, listing text, unlock boolean,
                         api_access boolean, credential_mode text, compute_limit_usd numeric, active_version_id uuid`;

/** $1 JSON: WorkflowColumns with the workflow's `id` and `owner_id`. */
export const CATALOG_INSERT_WORKFLOW = statement(
  'catalog_insert_workflow',
  `insert into workflows (id, owner_id, name, description, service_code, run_model, price_usd, listing, unlock, api_access,
                          credential_mode, compute_limit_usd, active_version_id, runs_count, created_at)
   select w.id, w.owner_id, w.name, w.description, w.service_code, w.run_model, w.price_usd, w.listing, w.unlock, w.api_access,
          w.credential_mode, w.compute_limit_usd, w.active_version_id, 0, now()
     from jsonb_to_record($1::jsonb) as w(id uuid, owner_id uuid, ${WORKFLOW_COLUMNS})`,
  [WorkflowSchema],
);

/** $1 JSON: WorkflowColumns with the workflow's `id`. */
export const CATALOG_UPDATE_WORKFLOW = statement(
  'catalog_update_workflow',
  `update workflows set name = w.name, description = w.description, service_code = w.service_code, run_model = w.run_model, price_usd = w.price_usd,
                        listing = w.listing, unlock = w.unlock, api_access = w.api_access, credential_mode = w.credential_mode,
                        compute_limit_usd = w.compute_limit_usd, active_version_id = w.active_version_id
     from jsonb_to_record($1::jsonb) as w(id uuid, ${WORKFLOW_COLUMNS})
    where workflows.id = w.id`,
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
