import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import type { JsonValue, NodeResult, RunOutputField } from '../../domain/graph/types.ts';
import { BILLING_STATUSES, OUTCOMES, RUN_STATUSES, type RunPhase } from '../../domain/run-status.ts';
import { IN_FLIGHT, liveRun, queuedRun, scheduledRun } from './run-predicates.ts';
import { checkedByDomain, createdAt, money, PgArrayType } from './columns.ts';
import { AccountSchema } from './accounts.ts';
import { CREDENTIAL_MODES, WorkflowSchema, WorkflowVersionSchema } from './catalog.ts';

/** Runs, their event log, their secrets and the idempotency records of POST /runs. The model as a whole: ./index.ts. */

/** How the caller had access to the run's workflow version (src/catalog/workflow-access.ts). */
export const USER_ACCESS = ['owned', 'purchased', 'wallet', 'purchase_required'] as const;
export type UserAccess = (typeof USER_ACCESS)[number];

/**
 * Engine-owned progress of a run: finished node results and started delay timers. Written in the same
 * transaction as the events that report it, so a restart resumes exactly where the log says it was.
 */
export interface RunProgressState {
  results: Record<string, NodeResult>;
  /** Delay nodes started and not yet finished: nodeId → due time, epoch ms. */
  timers: Record<string, number>;
}

export const RunSchema = defineEntity({
  name: 'Run',
  tableName: 'runs',
  properties: {
    id: p.uuid().primary(),
    accountId: p.manyToOne(AccountSchema).mapToPk().fieldName('account_id'),
    apiKeyId: p.uuid().nullable(),
    workflowId: p.manyToOne(WorkflowSchema).mapToPk().fieldName('workflow_id'),
    versionId: p.manyToOne(WorkflowVersionSchema).mapToPk().fieldName('version_id'),
    status: checkedByDomain(RUN_STATUSES).default('pending'),
    /** A pending run's sub-state (RUN_PHASES); null once it left `pending`. */
    phase: p.string().$type<RunPhase>().nullable(),
    reason: p.text().nullable(),
    suspendReason: p.string().nullable(),
    /** When a wait_timer suspension is due (earliest started delay). */
    resumeAt: p.datetime().nullable(),
    outcome: checkedByDomain(OUTCOMES).nullable(),
    billingStatus: checkedByDomain(BILLING_STATUSES).default('pending'),
    chargeUsd: money().nullable(),
    /** Counted against the key's spend cap: the displayed price until settled, then the final charge. */
    capUsd: money().default('0'),
    userAccess: checkedByDomain(USER_ACCESS),
    displayedPriceUsd: money().default('0'),
    creatorPriceUsd: money().default('0'),
    stepUsd: money().default('0'),
    computeLimitUsd: money(),
    computeUsd: money().default('0'),
    stepsExecuted: p.integer().default(0),
    funding: p.string().nullable(),
    bundleId: p.uuid().nullable(),
    holdUsd: money().default('0'),
    credentialMode: checkedByDomain(CREDENTIAL_MODES),
    inputs: p.json<Record<string, JsonValue>>(),
    progress: p.json<RunProgressState>(),
    outputs: p
      .json<RunOutputField[]>()
      .default('[]')
      .onCreate(() => []),
    cancelRequested: p.boolean().default(false),
    lastSequence: p.integer().default(0),
    engine: p.string().default('embedded'),
    leaseOwner: p.string().nullable(),
    leaseUntil: p.datetime().nullable(),
    /** The caller's labels from POST /runs (src/domain/run-metadata.ts): shown on every view, filtered by GET /runs. */
    metadata: p
      .json<Record<string, string>>()
      .default('{}')
      .onCreate(() => ({})),
    /** The `Cancel-After` deadline: past it a run that is not terminal is cancelled (src/runs/cancel-run.ts). */
    deadline: p.datetime().nullable(),
    /** The run this one replays (POST /runs/{id}/replay: docs/design/runs-in-sets.md), or null. */
    replayOf: p.uuid().nullable(),
    /** A delayed start (docs/design/flow-control.md): when the run enters the queue's line, or null: at its acceptance. */
    scheduledFor: p.datetime().nullable(),
    /** A debounced run's key (its account, workflow version and this name the burst), while it may still be joined. */
    debounceKey: p.text().nullable(),
    /** The latest start a debounced run's burst may push it to: its first call plus `maxDelay`. */
    debounceUntil: p.datetime().nullable(),
    /** The W3C trace context the run was started in (docs/tracing.md); null when tracing was off. */
    traceContext: p.json<{ traceparent: string; tracestate?: string }>().nullable(),
    createdAt: createdAt(),
    queuedAt: createdAt(),
    /** Priority class: 0 high, 1 normal, 2 low (docs/design/flow-control.md). */
    priority: p.smallint().default(1),
    /** The caller's concurrency key (its own customer or tenant), or null: none. */
    concurrencyKey: p.string().nullable(),
    /** Runs of this run's concurrency key that may be in flight at once, or null: no bound. */
    concurrencyLimit: p.integer().nullable(),
    /** The run's pass in its class: the queue's order after the class (docs/design/flow-control.md#the-order). */
    fairPass: p.bigint('number').default(0),
    startedAt: p.datetime().nullable(),
    completedAt: p.datetime().nullable(),
    updatedAt: createdAt(),
  },
  indexes: [
    { name: 'runs_account_created_idx', properties: ['accountId', 'createdAt', 'id'] },
    { name: 'runs_api_key_created_idx', properties: ['apiKeyId', 'createdAt'] },
    // A workflow's runs, newest first: the internal GraphQL search by workflow (src/graphql/queries/runs.ts).
    { name: 'runs_workflow_created_idx', properties: ['workflowId', 'createdAt', 'id'] },
    // Runs waiting for their delayed start, by time: the engines' rounds move the due ones into the line.
    { name: 'runs_scheduled_idx', properties: ['scheduledFor', 'id'], where: scheduledRun() },
    // A waiting debounced run, found by its key by the calls that join it (src/runs/debounce-runs.ts).
    { name: 'runs_debounce_idx', properties: ['accountId', 'debounceKey'], where: `${scheduledRun()} and debounce_key is not null` },
    // The queue in admission order per class, and each concurrency key's last pass (docs/design/flow-control.md).
    { name: 'runs_queue_fair_idx', properties: ['priority', 'fairPass', 'queuedAt', 'id'], where: queuedRun() },
    {
      name: 'runs_queue_key_idx',
      properties: ['accountId', 'concurrencyKey', 'priority', 'fairPass'],
      where: `${queuedRun()} and concurrency_key is not null`,
    },
    // GET /runs?concurrencyKey=: an account's runs of one key, newest first.
    { name: 'runs_concurrency_key_created_idx', properties: ['accountId', 'concurrencyKey', 'createdAt', 'id'], where: 'concurrency_key is not null' },
    // Runs in flight, per account: admission counts them and lease sweeps look for them, whatever the queue's depth.
    { name: 'runs_in_flight_idx', properties: ['accountId'], where: IN_FLIGHT },
    // Temporal runs whose workflow start is not marked yet: the Temporal engine's sweep (src/sql/temporal-runs.ts).
    { name: 'runs_temporal_unstarted_idx', properties: ['createdAt', 'id'], where: `engine = 'temporal' and lease_owner is null and ${liveRun()}` },
    // Runs past their deadline, found by the engines' periodic rounds whatever the number of runs.
    { name: 'runs_deadline_idx', properties: ['deadline'], where: `deadline is not null and ${liveRun()}` },
    // The most recent run durations, for queue ETAs.
    { name: 'runs_completed_idx', properties: ['completedAt'], where: 'completed_at is not null' },
  ],
});
export type Run = InferEntity<typeof RunSchema>;

/**
 * The event log, one row per write: the events one statement appended to a run, as parallel arrays, the
 * last of them numbered `last_sequence` (docs/round-trips.md#the-event-log-in-batches). No foreign key:
 * each batch is written from its run's row by the statement writing that row, and runs are never deleted.
 */
export const RunEventBatchSchema = defineEntity({
  name: 'RunEventBatch',
  tableName: 'run_event_batches',
  properties: {
    runId: p.manyToOne(RunSchema).mapToPk().fieldName('run_id').createForeignKeyConstraint(false).primary(),
    lastSequence: p.integer().primary(),
    types: p.type(new PgArrayType(false)).$type<string[]>(),
    nodeIds: p.type(new PgArrayType(false)).$type<(string | null)[]>(),
    data: p.type(new PgArrayType(true)).$type<unknown[]>(),
    ts: createdAt(),
  },
});
export type RunEventBatch = InferEntity<typeof RunEventBatchSchema>;

/** One row per event, as a view over the batches: for ad-hoc reads (the service reads the batches itself). */
export const RunEventSchema = defineEntity({
  name: 'RunEvent',
  tableName: 'run_events',
  view: true,
  expression: `select b.run_id, (b.last_sequence - cardinality(b.types) + e.ord)::int as sequence, e.type, e.node_id, e.data, b.ts
  from run_event_batches b cross join lateral unnest(b.types, b.node_ids, b.data) with ordinality as e(type, node_id, data, ord)`,
  properties: {
    runId: p.uuid().fieldName('run_id').primary(),
    sequence: p.integer().primary(),
    type: p.string(),
    nodeId: p.string().nullable(),
    data: p.json<Record<string, string>>(),
    ts: p.datetime(),
  },
});
export type RunEvent = InferEntity<typeof RunEventSchema>;

/** Password inputs and supplied provider credentials of one run, encrypted; deleted when the run ends. */
export const RUN_SECRET_KINDS = ['password_input', 'provider_credential'] as const;
export const RunSecretSchema = defineEntity({
  name: 'RunSecret',
  tableName: 'run_secrets',
  properties: {
    id: p.uuid().primary(),
    runId: p.manyToOne(RunSchema).mapToPk().fieldName('run_id').deleteRule('cascade'),
    kind: p.enum(RUN_SECRET_KINDS),
    name: p.string(),
    ciphertext: p.text(),
    createdAt: createdAt(),
  },
  uniques: [{ properties: ['runId', 'kind', 'name'] }],
});
export type RunSecret = InferEntity<typeof RunSecretSchema>;

export const IdempotencyRecordSchema = defineEntity({
  name: 'IdempotencyRecord',
  tableName: 'idempotency_records',
  properties: {
    id: p.uuid().primary(),
    accountId: p.manyToOne(AccountSchema).mapToPk().fieldName('account_id').deleteRule('cascade'),
    key: p.string().length(255),
    fingerprint: p.string().length(64),
    runId: p.manyToOne(RunSchema).mapToPk().fieldName('run_id').deleteRule('cascade'),
    createdAt: createdAt(),
    expiresAt: p.datetime(),
  },
  uniques: [{ name: 'idempotency_account_key_unique', properties: ['accountId', 'key'] }],
});
export type IdempotencyRecord = InferEntity<typeof IdempotencyRecordSchema>;
