import type { FilterQuery } from '@mikro-orm/core';
import type { Em } from '../../db/orm.ts';
import { isoOrNull } from '../../db/sql.ts';
import { RunEventSchema, RunSchema, type Run, type RunEvent } from '../../db/entities/index.ts';
import { toPublicRun, type RunRow } from '../../runs/run-views.ts';
import { priorityOfClass } from '../../domain/run-flow-control.ts';
import { groupPages, pagesOf, pushTo, uuids, type ChildPageKey } from './pages.ts';

/**
 * Internal (cross-account) reads of runs and their events, through the Run and RunEvent entities. A
 * Run is shown with the REST mapping (toPublicRun), so it looks the same on both surfaces.
 */

/** The properties a Run on the graph is built from (never its inputs, progress or lease). */
const RUN_FIELDS = [
  'id',
  'accountId',
  'workflowId',
  'versionId',
  'status',
  'phase',
  'reason',
  'suspendReason',
  'outcome',
  'billingStatus',
  'chargeUsd',
  'outputs',
  'createdAt',
  'queuedAt',
  'startedAt',
  'completedAt',
  'lastSequence',
  'metadata',
  'deadline',
  'replayOf',
  'scheduledFor',
  'priority',
  'concurrencyKey',
] as const satisfies readonly (keyof Run)[];

type RunFields = Pick<Run, (typeof RUN_FIELDS)[number]>;

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
  metadata: RunRow['metadata'];
  deadline: string | null;
  replayOf: string | null;
  scheduledFor: string | null;
  priority: RunRow['priority'];
  concurrencyKey: string | null;
  accountId: string;
  createdAt: string;
  lastSequence: number;
  /** The row itself, for the queue position (not exposed). */
  row: RunRow;
}

/** The REST services' view of a run's row, from the entity. */
function runRowOf(run: RunFields): RunRow {
  return {
    id: run.id,
    accountId: run.accountId,
    workflowId: run.workflowId,
    versionId: run.versionId,
    status: run.status,
    phase: run.phase ?? null,
    reason: run.reason ?? null,
    suspendReason: run.suspendReason ?? null,
    outcome: run.outcome ?? null,
    billingStatus: run.billingStatus,
    chargeUsd: run.chargeUsd ?? null,
    outputs: run.outputs ?? [],
    createdAt: isoOrNull(run.createdAt)!,
    queuedAt: isoOrNull(run.queuedAt)!,
    startedAt: isoOrNull(run.startedAt),
    completedAt: isoOrNull(run.completedAt),
    lastSequence: run.lastSequence,
    metadata: run.metadata ?? {},
    deadline: isoOrNull(run.deadline),
    replayOf: run.replayOf ?? null,
    scheduledFor: isoOrNull(run.scheduledFor),
    priority: priorityOfClass(run.priority),
    concurrencyKey: run.concurrencyKey ?? null,
  };
}

function toRunRecord(run: RunFields): RunRecord {
  const row = runRowOf(run);
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
    metadata: pub.metadata,
    deadline: pub.deadline,
    replayOf: row.replayOf,
    scheduledFor: row.scheduledFor,
    priority: row.priority,
    concurrencyKey: row.concurrencyKey,
    accountId: row.accountId,
    createdAt: row.createdAt,
    lastSequence: row.lastSequence,
    row,
  };
}

export async function runsByIds(em: Em, ids: readonly string[]): Promise<Map<string, RunRecord>> {
  const wanted = uuids(ids);
  if (!wanted.length) return new Map();
  const runs = await em.find(RunSchema, { id: { $in: wanted } }, { fields: RUN_FIELDS });
  return new Map(runs.map((r) => [r.id, toRunRecord(r)]));
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

/**
 * The search as a query (one row more than the page, to tell whether more follow): runs of every
 * account, newest first (createdAt desc, then id); a workflow's runs come from runs_workflow_created_idx.
 */
export function runSearchQuery(em: Em, f: RunSearch) {
  const where: FilterQuery<Run> = {};
  // The account by handle: a join on accounts, in the same statement.
  if (f.accountHandle != null) where.accountId = { handle: f.accountHandle } as never;
  if (f.status != null) where.status = f.status;
  if (f.workflowId != null) where.workflowId = f.workflowId.toLowerCase();
  if (f.createdAfter != null || f.createdBefore != null) {
    where.createdAt = { ...(f.createdAfter != null && { $gte: f.createdAfter }), ...(f.createdBefore != null && { $lt: f.createdBefore }) };
  }
  return em
    .createQueryBuilder(RunSchema, 'r')
    .select(RUN_FIELDS)
    .where(where as never)
    .orderBy({ createdAt: 'desc', id: 'desc' })
    .limit(f.limit + 1)
    .offset(f.offset);
}

export async function searchRuns(em: Em, f: RunSearch): Promise<{ runs: RunRecord[]; hasMore: boolean }> {
  if (f.workflowId != null && !uuids([f.workflowId]).length) return { runs: [], hasMore: false };
  const found = await runSearchQuery(em, f).getResultList();
  return { runs: found.slice(0, f.limit).map(toRunRecord), hasMore: found.length > f.limit };
}

/** Events after a cursor for many runs at once: key.parentId is the run id, key.offset the cursor. */
export async function eventsForRuns(em: Em, keys: readonly ChildPageKey[]): Promise<Map<string, RunEvent[]>> {
  const out = new Map<string, RunEvent[]>();
  for (const g of groupPages(keys)) {
    if (!g.parentIds.length) continue;
    const events = await pagesOf(em, {
      entity: RunEventSchema,
      where: { runId: { $in: g.parentIds }, sequence: { $gt: g.offset } },
      partition: 'c.run_id',
      order: { sequence: 'asc' },
      after: 0,
      upTo: g.limit,
    });
    for (const e of events) pushTo(out, `${e.runId}|${g.offset}|${g.limit}`, e);
  }
  return out;
}
