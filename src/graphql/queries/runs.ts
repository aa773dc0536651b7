import type { Em } from '../../db/orm.ts';
import { query } from '../../db/statement.ts';
import { GRAPHQL_EVENT_PAGES, GRAPHQL_RUNS_BY_IDS, GRAPHQL_SEARCH_RUNS } from '../../sql/graphql-runs.ts';
import { mapEventRow, mapRunRow, toPublicRun, type PublicRunEvent, type RunQueue, type RunRow } from '../../services/runs/run-views.ts';
import { groupPages, uuids, type ChildPageKey } from './sql.ts';

/**
 * Internal (cross-account) reads of runs, their events and queue positions. They read the same tables
 * and reuse the REST mapping (mapRunRow, toPublicRun), so a Run looks the same on both surfaces.
 */

/** The GraphQL Run's root value: the REST Run fields plus the internal extras. */
export interface RunRecord {
  id: string;
  status: RunRow['status'];
  reason: string | null;
  suspended: boolean;
  suspendReason: string | null;
  workflowId: string;
  workflowVersionId: string;
  startedAt: string | null;
  completedAt: string | null;
  /** Exact 6-place string (Decimal scalar). */
  displayedChargeUsd: string | null;
  billingStatus: RunRow['billingStatus'];
  outcome: RunRow['outcome'];
  outputs: unknown;
  accountId: string;
  accountHandle: string;
  createdAt: string;
  queuedAt: string;
  lastSequence: number;
  /** The row itself, for the queue position (not exposed). */
  row: RunRow;
}

export function toRunRecord(r: Record<string, unknown>): RunRecord {
  const row = mapRunRow(r);
  const pub = toPublicRun(row, null);
  return {
    id: pub.id,
    status: pub.status,
    reason: pub.reason,
    suspended: pub.suspended,
    suspendReason: row.status === 'suspended' ? row.suspendReason : null,
    workflowId: pub.workflowId,
    workflowVersionId: pub.workflowVersionId,
    startedAt: pub.startedAt,
    completedAt: pub.completedAt,
    displayedChargeUsd: row.chargeUsd,
    billingStatus: pub.billingStatus,
    outcome: pub.outcome,
    outputs: pub.outputs,
    accountId: row.accountId,
    accountHandle: String(r.account_handle),
    createdAt: row.createdAt,
    queuedAt: row.queuedAt,
    lastSequence: row.lastSequence,
    row,
  };
}

export async function runsByIds(em: Em, ids: readonly string[]): Promise<Map<string, RunRecord>> {
  const wanted = uuids(ids);
  if (!wanted.length) return new Map();
  const rows = await query(em, GRAPHQL_RUNS_BY_IDS, [wanted]);
  return new Map(rows.map((r) => [String(r.id), toRunRecord(r)]));
}

export interface RunSearch {
  accountHandle?: string | null;
  status?: RunRow['status'] | null;
  workflowId?: string | null;
  createdAfter?: Date | null;
  createdBefore?: Date | null;
  offset: number;
  limit: number;
}

/** Runs of every account, newest first (createdAt desc, then id), with the REST pagination. */
export async function searchRuns(em: Em, f: RunSearch): Promise<{ runs: RunRecord[]; hasMore: boolean }> {
  if (f.workflowId != null && !uuids([f.workflowId]).length) return { runs: [], hasMore: false };
  const rows = await query(em, GRAPHQL_SEARCH_RUNS, [
    f.accountHandle ?? null,
    f.status ?? null,
    f.workflowId?.toLowerCase() ?? null,
    f.createdAfter?.toISOString() ?? null,
    f.createdBefore?.toISOString() ?? null,
    f.limit + 1,
    f.offset,
  ]);
  return { runs: rows.slice(0, f.limit).map(toRunRecord), hasMore: rows.length > f.limit };
}

/** Events after a cursor for many runs at once: key.parentId is the run id, key.offset the cursor. */
export async function eventsForRuns(em: Em, keys: readonly ChildPageKey[]): Promise<Map<string, PublicRunEvent[]>> {
  const out = new Map<string, PublicRunEvent[]>();
  for (const g of groupPages(keys)) {
    if (!g.parentIds.length) continue;
    const rows = await query(em, GRAPHQL_EVENT_PAGES, [g.parentIds, g.offset, g.limit]);
    for (const r of rows) {
      const key = `${String(r.run_id)}|${g.offset}|${g.limit}`;
      const list = out.get(key) ?? [];
      list.push(mapEventRow(r));
      out.set(key, list);
    }
  }
  return out;
}

