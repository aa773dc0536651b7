import type { Em } from '../../db/orm.ts';
import type { Graph } from '../../domain/graph/types.ts';
import { inputSchema } from '../../domain/graph/validate.ts';
import { query } from '../../db/statement.ts';
import { GRAPHQL_SEARCH_WORKFLOWS, GRAPHQL_VERSION_PAGES, GRAPHQL_VERSIONS_BY_IDS, GRAPHQL_WORKFLOWS_BY_IDS } from '../../sql/graphql-workflows.ts';
import { groupPages, iso, json, str, strOrNull, uuids, type ChildPageKey } from './sql.ts';

/**
 * Internal reads of workflows and versions. These are the catalog's facts, not a caller's view: no
 * userAccess or per-caller price (those belong to the REST caller views in workflow-access.ts).
 */

export interface WorkflowRecord {
  id: string;
  name: string;
  description: string | null;
  serviceCode: string | null;
  ownerId: string;
  ownerHandle: string;
  runModel: 'free' | 'per_run';
  priceUsd: string;
  listing: 'public' | 'unlisted' | 'none';
  unlock: boolean;
  apiAccessAllowed: boolean;
  credentialMode: 'service_hosted' | 'byok';
  computeLimitUsd: string | null;
  activeVersionId: string | null;
  runsCount: number;
  createdAt: string;
}

export interface WorkflowVersionRecord {
  id: string;
  workflowId: string;
  label: string;
  createdAt: string;
  inputCount: number;
  isActive: boolean;
}

function toWorkflow(r: Record<string, unknown>): WorkflowRecord {
  return {
    id: str(r.id),
    name: str(r.name),
    description: strOrNull(r.description),
    serviceCode: strOrNull(r.service_code),
    ownerId: str(r.owner_id),
    ownerHandle: str(r.owner_handle),
    runModel: r.run_model as WorkflowRecord['runModel'],
    priceUsd: str(r.price_usd),
    listing: r.listing as WorkflowRecord['listing'],
    unlock: Boolean(r.unlock),
    apiAccessAllowed: Boolean(r.api_access),
    credentialMode: r.credential_mode as WorkflowRecord['credentialMode'],
    computeLimitUsd: strOrNull(r.compute_limit_usd),
    activeVersionId: strOrNull(r.active_version_id),
    runsCount: Number(r.runs_count ?? 0),
    createdAt: iso(r.created_at),
  };
}

export async function workflowsByIds(em: Em, ids: readonly string[]): Promise<Map<string, WorkflowRecord>> {
  const wanted = uuids(ids);
  if (!wanted.length) return new Map();
  const rows = await query(em, GRAPHQL_WORKFLOWS_BY_IDS, [wanted]);
  return new Map(rows.map((r) => [String(r.id), toWorkflow(r)]));
}

export interface WorkflowSearch {
  ownerHandle?: string | null;
  listing?: WorkflowRecord['listing'] | null;
  q?: string | null;
  offset: number;
  limit: number;
}

/** Every workflow (any listing), ordered by name then id like the REST list. */
export async function searchWorkflows(em: Em, f: WorkflowSearch): Promise<{ workflows: WorkflowRecord[]; hasMore: boolean }> {
  const like = f.q ? `%${f.q.replace(/[\\%_]/g, (c) => `\\${c}`)}%` : null;
  const rows = await query(em, GRAPHQL_SEARCH_WORKFLOWS, [f.ownerHandle ?? null, f.listing ?? null, like, f.limit + 1, f.offset]);
  return { workflows: rows.slice(0, f.limit).map(toWorkflow), hasMore: rows.length > f.limit };
}

function toVersion(r: Record<string, unknown>): WorkflowVersionRecord {
  return {
    id: str(r.id),
    workflowId: str(r.workflow_id),
    label: str(r.label),
    createdAt: iso(r.created_at),
    inputCount: inputSchema(json<Graph>(r.graph)).length,
    isActive: Boolean(r.is_active),
  };
}

export async function versionsByIds(em: Em, ids: readonly string[]): Promise<Map<string, WorkflowVersionRecord>> {
  const wanted = uuids(ids);
  if (!wanted.length) return new Map();
  const rows = await query(em, GRAPHQL_VERSIONS_BY_IDS, [wanted]);
  return new Map(rows.map((r) => [String(r.id), toVersion(r)]));
}

/** Pages of versions (newest first) for many workflows in one query per offset/limit pair. */
export async function versionsForWorkflows(em: Em, keys: readonly ChildPageKey[]): Promise<Map<string, WorkflowVersionRecord[]>> {
  const out = new Map<string, WorkflowVersionRecord[]>();
  for (const g of groupPages(keys)) {
    if (!g.parentIds.length) continue;
    const rows = await query(em, GRAPHQL_VERSION_PAGES, [g.parentIds, g.offset, g.limit]);
    for (const r of rows) {
      const key = `${String(r.workflow_id)}|${g.offset}|${g.limit}`;
      out.set(key, [...(out.get(key) ?? []), toVersion(r)]);
    }
  }
  return out;
}
