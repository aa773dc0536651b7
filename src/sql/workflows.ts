import { statement } from '../db/statement.ts';
import { AccountSchema, ApiKeyRateWindowSchema, PurchaseSchema, WorkflowRunTallySchema, WorkflowSchema, WorkflowVersionSchema } from '../db/entities/index.ts';
import { rateHitCte } from './rate-windows.ts';

/**
 * Workflows as one caller sees them (src/catalog/workflow-access.ts applies the rules of
 * docs/design/rules.md to these rows): tables `workflows`, `workflow_versions`, with the caller's
 * `purchases` row and the owner's `accounts` row. $1 is always the caller's account id.
 */

/** A workflow's completed runs: the catalog's runs_count plus the tallies of completed runs (written by FINISH_RUNS, src/sql/finish-runs.ts). */
export const RUNS_COUNT_SQL = `(w.runs_count + coalesce((select sum(t.runs) from workflow_run_tallies t where t.workflow_id = w.id), 0))`;

/** The joins of every workflow read: the workflow, its owner, `caller`'s purchase and the version shown to them. */
const from = (caller: string) => `workflows w
    join accounts o on o.id = w.owner_id
    left join purchases p on p.workflow_id = w.id and p.account_id = ${caller}::uuid
    left join workflow_versions v on v.id = coalesce(p.version_id, w.active_version_id)`;

/**
 * A fingerprint of everything a run's acceptance reads of the workflow as `caller` sees it: visibility,
 * access and the purchase pin, price, API access, the owner's pause, credential mode, compute limit, the
 * active and shown versions. Versions are immutable (src/sql/catalog-workflows.ts), so a version id stands
 * for its graph; the run count and the texts are left out. POST /runs keeps a workflow read for a while
 * and ACCEPT_RUNS (src/sql/accept-runs.ts) writes nothing unless this is still the read's.
 */
const viewToken = (caller: string) => `md5(row(w.owner_id = ${caller}::uuid, w.owner_id, p.id, p.version_id, w.listing, w.unlock,
    w.run_model, w.price_usd, w.api_access, w.credential_mode, w.compute_limit_usd, w.active_version_id,
    o.listings_paused, v.id)::text)`;

/** Public listings, `caller`'s own workflows and what `caller` purchased. */
const visible = (caller: string) => `(w.listing = 'public' or w.owner_id = ${caller}::uuid or p.id is not null)`;

/** The view token of workflow `workflow` as `caller` sees it, or null when it is not visible to them (placeholders). */
export const viewTokenOf = (caller: string, workflow: string): string =>
  `(select ${viewToken(caller)} from ${from(caller)} where w.id = ${workflow}::uuid and ${visible(caller)})`;

/** Columns and joins shared by every workflow read: the caller's pin, and the version shown to them. */
const select = (runsCount: string, extra = '') => `
  select w.id, w.owner_id, o.handle as owner_handle, o.listings_paused as owner_listings_paused,
         w.name, w.description, w.service_code, w.run_model, w.price_usd, w.listing, w.unlock,
         w.api_access, w.credential_mode, w.compute_limit_usd, w.active_version_id, ${runsCount} as runs_count,
         p.version_id as pinned_version_id,
         v.id as shown_version_id, v.label as shown_version_label, v.graph as shown_version_graph${extra}
    from ${from('$1')}`;

/** Public listings, the caller's own workflows and what the caller purchased. */
const VISIBLE = visible('$1');

/** The caller's access (userAccess), as accessOf in workflow-access.ts decides it. */
const ACCESS = `(case when w.owner_id = $1::uuid then 'owned' when p.id is not null then 'purchased'
                      when w.unlock then 'purchase_required' else 'wallet' end)`;

/** One workflow (its detail, a run's acceptance), with no run count to add up: $1 caller, $2 workflow id. */
export const FIND_VISIBLE_WORKFLOW = statement('find_visible_workflow', `${select('null::int')} where w.id = $2::uuid and ${VISIBLE}`, [
  WorkflowSchema,
  AccountSchema,
  PurchaseSchema,
  WorkflowVersionSchema,
]);

/**
 * FIND_VISIBLE_WORKFLOW for POST /runs, counting the request in its API key's rate window in the same
 * statement (`hit`, src/sql/rate-windows.ts; nothing is counted when $4 is null). It is an autocommit
 * statement whose only write is to the unlogged window table, so its commit waits for no WAL flush and
 * the key's row is locked only while the statement runs: one key's concurrent requests are not counted
 * at the pace of the acceptance's commit (docs/design/rules.md#rate-limit).
 * $1 caller, $2 workflow id, $3 API key id, $4 its limit per minute or null. One row: the hit's columns
 * (null without a limit), then the workflow's with its `view_token` (all null when it is not visible to
 * the caller).
 */
export const FIND_WORKFLOW_TO_RUN = statement(
  'find_workflow_to_run',
  `with ${rateHitCte('$3', '$4')}
select hit.allowed, hit.counted, hit.oldest_ms, hit.now_ms, wf.*
  from (select 1) one
  left join hit on true
  left join lateral (${select('null::int', `, ${viewToken('$1')} as view_token`)} where w.id = $2::uuid and ${VISIBLE}) wf on true`,
  [ApiKeyRateWindowSchema, WorkflowSchema, AccountSchema, PurchaseSchema, WorkflowVersionSchema],
);

/**
 * A page of visible workflows ordered by name then id; each filter applies when given (null: any).
 * $1 caller, $2 `ilike` pattern on name or description, $3 run model, $4 access, $5 limit, $6 offset.
 */
export const LIST_VISIBLE_WORKFLOWS = statement(
  'list_visible_workflows',
  `${select(RUNS_COUNT_SQL)}
    where ${VISIBLE}
      and ($2::text is null or w.name ilike $2::text or coalesce(w.description, '') ilike $2::text)
      and ($3::text is null or w.run_model = $3::text)
      and ($4::text is null or ${ACCESS} = $4::text)
    order by w.name asc, w.id asc limit $5::bigint offset $6::bigint`,
  [WorkflowRunTallySchema, WorkflowSchema, AccountSchema, PurchaseSchema, WorkflowVersionSchema],
);

/** $1 version id, $2 workflow id. */
export const FIND_WORKFLOW_VERSION = statement(
  'find_workflow_version',
  `select id, workflow_id, label, graph, created_at from workflow_versions where id = $1::uuid and workflow_id = $2::uuid`,
  [WorkflowVersionSchema],
);

/**
 * A page of a workflow's versions, newest first: all of them ($2 true, for the owner), else the active
 * version $3 and the pinned one $4. $1 workflow id, $5 limit, $6 offset.
 */
export const LIST_WORKFLOW_VERSIONS = statement(
  'list_workflow_versions',
  `select id, label, graph, created_at from workflow_versions
    where workflow_id = $1::uuid and ($2::boolean or id = $3::uuid or id = $4::uuid)
    order by created_at desc, id desc limit $5::bigint offset $6::bigint`,
  [WorkflowVersionSchema],
);
