import type { Em } from '../db/orm.ts';
import { json } from '../db/sql.ts';
import type { UserAccess } from '../db/entities/index.ts';
import type { Graph } from '../domain/graph/types.ts';
import { countStepNodes } from '../domain/graph/validate.ts';
import { displayedRunPrice, toDb, usd } from '../domain/money.ts';
import type { Pricing } from './pricing.ts';
import { query, type StatementEm } from '../db/statement.ts';
import { FIND_VISIBLE_WORKFLOW, FIND_WORKFLOW_TO_RUN, FIND_WORKFLOW_VERSION, LIST_VISIBLE_WORKFLOWS } from '../sql/workflows.ts';
import type { HitRow } from '../sql/rate-windows.ts';

/**
 * What one caller may see and do with one workflow: the single place that applies the visibility,
 * access, pinning and price rules of docs/design/rules.md and money.md. Lists, details, versions and POST /runs all
 * read workflows through here, so they can never disagree.
 */

export interface WorkflowRow {
  id: string;
  ownerId: string;
  ownerHandle: string;
  ownerListingsPaused: boolean;
  name: string;
  description: string | null;
  serviceCode: string | null;
  runModel: 'free' | 'per_run';
  priceUsd: string;
  listing: 'public' | 'unlisted' | 'none';
  unlock: boolean;
  apiAccess: boolean;
  credentialMode: 'service_hosted' | 'byok';
  computeLimitUsd: string | null;
  activeVersionId: string | null;
  /** Completed runs; read by listings only (null elsewhere: a workflow's detail does not show it). */
  runsCount: number | null;
  pinnedVersionId: string | null;
  /** The version this caller sees and runs by default: the pin, else the active version. */
  shownVersion: { id: string; label: string; graph: Graph } | null;
}

export interface WorkflowAccess {
  row: WorkflowRow;
  userAccess: UserAccess;
  /** Creator price charged to this caller (0 when not charged). */
  creatorPriceUsd: string;
  /** The displayed run price of docs/design/money.md; null when it is 0. */
  displayedRunPriceUsd: string | null;
  apiRunnableNow: boolean;
  isOwner: boolean;
}

/** A workflow's completed runs, as an SQL expression over `workflows w` (read by tests). */
export { RUNS_COUNT_SQL } from '../sql/workflows.ts';

function mapRow(r: Record<string, unknown>): WorkflowRow {
  return {
    id: String(r.id),
    ownerId: String(r.owner_id),
    ownerHandle: String(r.owner_handle),
    ownerListingsPaused: Boolean(r.owner_listings_paused),
    name: String(r.name),
    description: (r.description as string | null) ?? null,
    serviceCode: (r.service_code as string | null) ?? null,
    runModel: r.run_model as WorkflowRow['runModel'],
    priceUsd: String(r.price_usd),
    listing: r.listing as WorkflowRow['listing'],
    unlock: Boolean(r.unlock),
    apiAccess: Boolean(r.api_access),
    credentialMode: r.credential_mode as WorkflowRow['credentialMode'],
    computeLimitUsd: r.compute_limit_usd === null || r.compute_limit_usd === undefined ? null : String(r.compute_limit_usd),
    activeVersionId: (r.active_version_id as string | null) ?? null,
    runsCount: r.runs_count === null || r.runs_count === undefined ? null : Number(r.runs_count),
    pinnedVersionId: (r.pinned_version_id as string | null) ?? null,
    shownVersion: r.shown_version_id
      ? { id: String(r.shown_version_id), label: String(r.shown_version_label), graph: json<Graph>(r.shown_version_graph) }
      : null,
  };
}

export function accessOf(row: WorkflowRow, accountId: string, pricing: Pricing): WorkflowAccess {
  const isOwner = row.ownerId === accountId;
  const userAccess: UserAccess = isOwner ? 'owned' : row.pinnedVersionId ? 'purchased' : row.unlock ? 'purchase_required' : 'wallet';
  // A purchase_required caller is shown the wallet price (docs/design/money.md, "displayed run price").
  const charged = (userAccess === 'wallet' || userAccess === 'purchase_required') && row.runModel === 'per_run';
  const creatorPrice = charged ? usd(row.priceUsd) : usd(0);
  const steps = row.shownVersion ? countStepNodes(row.shownVersion.graph) : 0;
  const displayed = displayedRunPrice(creatorPrice, pricing.stepUsd, steps);
  const apiRunnableNow = row.apiAccess && userAccess !== 'purchase_required' && (isOwner || !row.ownerListingsPaused) && row.shownVersion !== null;
  return {
    row,
    userAccess,
    creatorPriceUsd: toDb(creatorPrice),
    displayedRunPriceUsd: displayed.isZero() ? null : toDb(displayed),
    apiRunnableNow,
    isOwner,
  };
}

/** One workflow as the caller sees it, or null when it does not exist or is not visible to them. */
export async function findVisibleWorkflow(em: Em, accountId: string, workflowId: string): Promise<WorkflowRow | null> {
  const rows = await query(em, FIND_VISIBLE_WORKFLOW, [accountId, workflowId]);
  return rows[0] ? mapRow(rows[0]) : null;
}

/**
 * findVisibleWorkflow for POST /runs: with `rateLimit`, the request is counted in API key `apiKeyId`'s
 * rate window by the same statement (FIND_WORKFLOW_TO_RUN) and `hit` says how; null without a limit.
 * `token`: the read's view token (src/sql/workflows.ts), which the acceptance is fenced on.
 */
export async function findWorkflowToRun(
  em: StatementEm,
  accountId: string,
  workflowId: string,
  apiKeyId: string,
  rateLimit: number | null,
): Promise<{ row: WorkflowRow | null; hit: HitRow | null; token: string | null }> {
  const [r] = await query<Record<string, unknown> & HitRow>(em, FIND_WORKFLOW_TO_RUN, [accountId, workflowId, apiKeyId, rateLimit]);
  return { row: r?.id ? mapRow(r) : null, hit: r && r.allowed !== null ? r : null, token: r?.id ? String(r.view_token) : null };
}

export interface WorkflowFilter {
  q?: string;
  runModel?: 'free' | 'per_run';
  access?: UserAccess;
  offset: number;
  limit: number;
}

/** A page of visible workflows ordered by name then id, plus whether another page follows. */
export async function listVisibleWorkflows(em: StatementEm, accountId: string, f: WorkflowFilter): Promise<{ rows: WorkflowRow[]; hasMore: boolean }> {
  const like = f.q ? `%${f.q.replace(/[\\%_]/g, (c) => `\\${c}`)}%` : null;
  const rows = await query(em, LIST_VISIBLE_WORKFLOWS, [accountId, like, f.runModel || null, f.access || null, f.limit + 1, f.offset]);
  return { rows: rows.slice(0, f.limit).map(mapRow), hasMore: rows.length > f.limit };
}

export interface VersionRow {
  id: string;
  workflowId: string;
  label: string;
  graph: Graph;
  createdAt: unknown;
}

export async function findVersion(em: StatementEm, workflowId: string, versionId: string): Promise<VersionRow | null> {
  const rows = await query(em, FIND_WORKFLOW_VERSION, [versionId, workflowId]);
  const r = rows[0];
  return r ? { id: String(r.id), workflowId: String(r.workflow_id), label: String(r.label), graph: json<Graph>(r.graph), createdAt: r.created_at } : null;
}
