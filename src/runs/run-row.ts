import { isoOrNull, json } from '../db/sql.ts';
import type { RunOutputField } from '../domain/graph/types.ts';
import { toJson } from '../domain/money.ts';
import type { RunMetadata } from '../domain/run-metadata.ts';
import { priorityOfClass, type Priority } from '../domain/run-flow-control.ts';
import type { BillingStatus, Outcome, QueueState, RunPhase, RunStatus } from '../domain/run-status.ts';

/**
 * A run's row as read (RUN_COLUMNS of src/sql/runs.ts) and the spec's Run built from it: the services
 * and adapters need it for their responses, the webhook sender for the body it renders from the run.
 */

export interface RunRow {
  id: string;
  accountId: string;
  workflowId: string;
  versionId: string;
  status: RunStatus;
  phase: RunPhase | null;
  reason: string | null;
  suspendReason: string | null;
  outcome: Outcome | null;
  billingStatus: BillingStatus;
  chargeUsd: string | null;
  outputs: RunOutputField[];
  createdAt: string;
  queuedAt: string;
  startedAt: string | null;
  completedAt: string | null;
  lastSequence: number;
  /** The caller's metadata (src/domain/run-metadata.ts); `{}` when none was sent. */
  metadata: RunMetadata;
  /** The `Cancel-After` deadline, or null. */
  deadline: string | null;
  /** The run this one replays, or null. */
  replayOf: string | null;
  /** A delayed start (docs/design/flow-control.md): when it enters (or entered) the line; null: at acceptance. */
  scheduledFor: string | null;
  /** Its priority and concurrency key (docs/design/flow-control.md); normal and null when the row was read without them. */
  priority: Priority;
  concurrencyKey: string | null;
  /** The exact queue place, when the row was read with it (null: not queued). */
  queuePosition?: number | null;
}

export function mapRunRow(r: Record<string, unknown>): RunRow {
  return {
    id: String(r.id),
    accountId: String(r.account_id),
    workflowId: String(r.workflow_id),
    versionId: String(r.version_id),
    status: r.status as RunRow['status'],
    phase: (r.phase as RunPhase | null) ?? null,
    reason: (r.reason as string | null) ?? null,
    suspendReason: (r.suspend_reason as string | null) ?? null,
    outcome: (r.outcome as RunRow['outcome']) ?? null,
    billingStatus: r.billing_status as RunRow['billingStatus'],
    chargeUsd: r.charge_usd === null || r.charge_usd === undefined ? null : String(r.charge_usd),
    outputs: r.outputs === undefined ? [] : json<RunOutputField[]>(r.outputs),
    createdAt: isoOrNull(r.created_at)!,
    queuedAt: isoOrNull(r.queued_at)!,
    startedAt: isoOrNull(r.started_at),
    completedAt: isoOrNull(r.completed_at),
    lastSequence: Number(r.last_sequence ?? 0),
    metadata: r.metadata === undefined || r.metadata === null ? {} : json<RunMetadata>(r.metadata),
    deadline: isoOrNull(r.deadline),
    replayOf: r.replay_of === undefined || r.replay_of === null ? null : String(r.replay_of),
    scheduledFor: isoOrNull(r.scheduled_for),
    priority: r.priority === undefined || r.priority === null ? 'normal' : priorityOfClass(Number(r.priority)),
    concurrencyKey: r.concurrency_key === undefined || r.concurrency_key === null ? null : String(r.concurrency_key),
    ...(r.queue_position === undefined ? {} : { queuePosition: r.queue_position === null ? null : Number(r.queue_position) }),
  };
}

/** A pending run's place in the queue (src/runs/queue-positions.ts computes it). */
export interface RunQueue {
  state: QueueState;
  position: number;
  etaSeconds: number | null;
}

export function toPublicRun(run: RunRow, queue: RunQueue | null) {
  return {
    id: run.id,
    status: run.status,
    reason: run.status === 'failed' ? (run.reason ?? 'the run failed') : null,
    suspended: run.status === 'suspended',
    workflowId: run.workflowId,
    workflowVersionId: run.versionId,
    startedAt: run.startedAt,
    completedAt: run.completedAt,
    displayedChargeUsd: run.chargeUsd === null ? null : toJson(run.chargeUsd),
    billingStatus: run.billingStatus,
    outcome: run.status === 'completed' ? run.outcome : null,
    queue,
    outputs: run.outputs,
    metadata: run.metadata,
    deadline: run.deadline,
    // Only on a replayed run: the run it replays.
    ...(run.replayOf === null ? {} : { replayOf: run.replayOf }),
    // Only on a run accepted with a later start.
    ...(run.scheduledFor === null ? {} : { scheduledFor: run.scheduledFor }),
    // Only when given at the start: a priority other than normal, a concurrency key.
    ...(run.priority === 'normal' ? {} : { priority: run.priority }),
    ...(run.concurrencyKey === null ? {} : { concurrencyKey: run.concurrencyKey }),
  };
}

export type PublicRun = ReturnType<typeof toPublicRun>;
