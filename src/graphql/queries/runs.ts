import type { Em } from '../../db/orm.ts';
import { RUN_COLUMNS } from '../../sql/runs.ts';
import { mapEventRow, mapRunRow, toPublicRun, type PublicRunEvent, type RunQueue, type RunRow } from '../../services/runs/run-views.ts';
import { groupPages, marks, uuids, type ChildPageKey } from './sql.ts';

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

const COLUMNS = RUN_COLUMNS.split(',')
  .map((c) => `r.${c.trim()}`)
  .join(', ');
const SELECT = `select ${COLUMNS}, a.handle as account_handle from runs r join accounts a on a.id = r.account_id`;

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
  const rows = await em.execute<Record<string, unknown>[]>(`${SELECT} where r.id in (${marks(wanted.length)})`, wanted);
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
  const where: string[] = [];
  const params: unknown[] = [];
  if (f.accountHandle != null) {
    where.push('a.handle = ?');
    params.push(f.accountHandle);
  }
  if (f.status != null) {
    where.push('r.status = ?');
    params.push(f.status);
  }
  if (f.workflowId != null) {
    if (!uuids([f.workflowId]).length) return { runs: [], hasMore: false };
    where.push('r.workflow_id = ?');
    params.push(f.workflowId.toLowerCase());
  }
  if (f.createdAfter != null) {
    where.push('r.created_at >= ?');
    params.push(f.createdAfter);
  }
  if (f.createdBefore != null) {
    where.push('r.created_at < ?');
    params.push(f.createdBefore);
  }
  params.push(f.limit + 1, f.offset);
  const rows = await em.execute<Record<string, unknown>[]>(
    `${SELECT} ${where.length ? `where ${where.join(' and ')}` : ''}
      order by r.created_at desc, r.id desc limit ? offset ?`,
    params,
  );
  return { runs: rows.slice(0, f.limit).map(toRunRecord), hasMore: rows.length > f.limit };
}

/** Events after a cursor for many runs at once: key.parentId is the run id, key.offset the cursor. */
export async function eventsForRuns(em: Em, keys: readonly ChildPageKey[]): Promise<Map<string, PublicRunEvent[]>> {
  const out = new Map<string, PublicRunEvent[]>();
  for (const g of groupPages(keys)) {
    if (!g.parentIds.length) continue;
    const rows = await em.execute<Record<string, unknown>[]>(
      `select run_id, type, sequence, ts, node_id, data from (
         select e.run_id, e.type, e.sequence, e.ts, e.node_id, e.data,
                row_number() over (partition by e.run_id order by e.sequence) as rn
           from run_events e where e.run_id in (${marks(g.parentIds.length)}) and e.sequence > ?
       ) x where rn <= ? order by run_id, sequence`,
      [...g.parentIds, g.offset, g.limit],
    );
    for (const r of rows) {
      const key = `${String(r.run_id)}|${g.offset}|${g.limit}`;
      const list = out.get(key) ?? [];
      list.push(mapEventRow(r));
      out.set(key, list);
    }
  }
  return out;
}

