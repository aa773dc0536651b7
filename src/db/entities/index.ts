import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import type { Graph, JsonValue, NodeResult, RunOutputField } from '../../domain/graph/types.ts';
import { BILLING_STATUSES, OUTCOMES, RUN_STATUSES, type RunPhase } from '../../domain/run-status.ts';
import { IN_FLIGHT, leftQueue, liveRun, queuedRun } from '../../sql/run-predicates.ts';
import { checkedByDomain, createdAt, money, PgArrayType } from './columns.ts';
import { RunLabelSchema } from './run-labels.ts';

export { RunLabelSchema, type RunLabel } from './run-labels.ts';

/**
 * The whole data model. MikroORM owns the schema and the migrations from it, and the internal GraphQL
 * reads through these entities (src/graphql/queries: `em.find` and the QueryBuilder on a per-request
 * EntityManager). The services' run, wallet and acceptance paths are statements of their own in
 * src/sql. Foreign keys are mapped to their primary key values (`mapToPk`) because those statements read
 * and fence rows by id; a relation can still be filtered on through them (`{ ownerId: { handle } }`
 * joins the account). Money columns are numeric(18,6) and surface as decimal strings, never floats.
 * Column helpers: ./columns.ts; the database functions: ./routines.ts.
 */

export const AccountSchema = defineEntity({
  name: 'Account',
  tableName: 'accounts',
  properties: {
    id: p.uuid().primary(),
    handle: p.string().unique(),
    restricted: p.boolean().default(false),
    listingsPaused: p.boolean().default(false),
    maxConcurrentRuns: p.integer().nullable(),
    connections: p.json<string[]>().default('[]').onCreate(() => []),
    createdAt: createdAt(),
  },
});
export type Account = InferEntity<typeof AccountSchema>;

/** Current balance of an account; every change is mirrored by a ledger row in the same transaction. */
export const WalletSchema = defineEntity({
  name: 'Wallet',
  tableName: 'wallets',
  properties: {
    accountId: p.manyToOne(AccountSchema).mapToPk().fieldName('account_id').primary().deleteRule('cascade'),
    balanceUsd: money().default('0'),
    heldUsd: money().default('0'),
    updatedAt: createdAt(),
  },
});
export type Wallet = InferEntity<typeof WalletSchema>;

export const LEDGER_KINDS = ['credit', 'hold', 'release', 'charge', 'bundle_charge', 'unpaid'] as const;
export type LedgerKind = (typeof LEDGER_KINDS)[number];

/**
 * Append-only wallet history. `amountUsd` is signed as it moves the available balance. Every row is
 * written from the wallet row it mirrors, in the statement that changes that wallet, and accounts are
 * never deleted: no foreign key to accounts (Migration20261202020000LedgerWithoutAccountKey).
 */
export const LedgerEntrySchema = defineEntity({
  name: 'LedgerEntry',
  tableName: 'ledger_entries',
  properties: {
    id: p.bigint('number').primary().autoincrement(),
    accountId: p.manyToOne(AccountSchema).mapToPk().fieldName('account_id').createForeignKeyConstraint(false),
    runId: p.uuid().nullable(),
    kind: p.enum(LEDGER_KINDS),
    amountUsd: money(),
    balanceAfterUsd: money(),
    note: p.text().nullable(),
    createdAt: createdAt(),
  },
  indexes: [{ properties: ['accountId', 'id'] }],
});
export type LedgerEntry = InferEntity<typeof LedgerEntrySchema>;

export const SPEND_WINDOWS = ['daily', 'monthly', 'lifetime'] as const;
export type SpendWindow = (typeof SPEND_WINDOWS)[number];

export const ApiKeySchema = defineEntity({
  name: 'ApiKey',
  tableName: 'api_keys',
  properties: {
    id: p.uuid().primary(),
    accountId: p.manyToOne(AccountSchema).mapToPk().fieldName('account_id').deleteRule('cascade'),
    /** sha256 of the secret, hex; the secret itself is never stored. */
    keyHash: p.string().length(64).unique(),
    /** First characters of the secret, to recognise a key in a console without revealing it. */
    prefix: p.string().length(16),
    scopes: p.json<string[]>(),
    rateLimitPerMinute: p.integer().default(60),
    spendCapWindow: p.enum(SPEND_WINDOWS).nullable(),
    spendCapUsd: money().nullable(),
    expiresAt: p.datetime().nullable(),
    revoked: p.boolean().default(false),
    createdAt: createdAt(),
  },
});
export type ApiKey = InferEntity<typeof ApiKeySchema>;

/**
 * The POST /runs sliding window of one API key, shared by every API process on the database: the
 * requests counted in each of the last 60 seconds (src/sql/rate-windows.ts). One row per key, so
 * concurrent requests for a key serialise on it.
 */
export const ApiKeyRateWindowSchema = defineEntity({
  name: 'ApiKeyRateWindow',
  tableName: 'api_key_rate_windows',
  properties: {
    apiKeyId: p.manyToOne(ApiKeySchema).mapToPk().fieldName('api_key_id').primary().deleteRule('cascade'),
    /** Epoch second of the newest bucket (`counts[60]`). */
    second: p.bigint('number'),
    /** Requests counted per second, oldest first: `counts[i]` for the second `second - 60 + i`. */
    counts: p.array<number>().columnType('int[]'),
    /** The sum of `counts`, kept with them. */
    total: p.integer().default(0),
    /** The `second` `total` was kept for; another (a row an older version wrote) has its total added up again. */
    totalSecond: p.bigint('number').nullable(),
    /** Whether the last request was counted (false: it was refused with 429). */
    allowed: p.boolean(),
    /** How many requests the last count allowed (one statement counts a batch's requests of the key together). */
    lastCounted: p.integer().default(0),
  },
});
export type ApiKeyRateWindow = InferEntity<typeof ApiKeyRateWindowSchema>;

/** Open streams per holder across processes (src/services/streams/stream-slots.ts). */
export const StreamSlotTotalSchema = defineEntity({
  name: 'StreamSlotTotal',
  tableName: 'stream_slot_totals',
  properties: {
    holder: p.string().primary(),
    open: p.integer(),
  },
});

/** What one process holds of a holder's open streams, under a lease it renews. */
export const StreamSlotLeaseSchema = defineEntity({
  name: 'StreamSlotLease',
  tableName: 'stream_slot_leases',
  properties: {
    holder: p.string().primary(),
    processId: p.string().primary(),
    open: p.integer(),
    leaseUntil: p.datetime(),
  },
  indexes: [
    { name: 'stream_slot_leases_process_idx', properties: ['processId'] },
    { name: 'stream_slot_leases_lease_idx', properties: ['leaseUntil'] },
  ],
});

export const ProviderKeySchema = defineEntity({
  name: 'ProviderKey',
  tableName: 'provider_keys',
  properties: {
    id: p.uuid().primary(),
    accountId: p.manyToOne(AccountSchema).mapToPk().fieldName('account_id').deleteRule('cascade'),
    provider: p.string(),
    /** AES-256-GCM ciphertext (see src/security/crypto.ts). */
    ciphertext: p.text(),
    createdAt: createdAt(),
  },
  uniques: [{ properties: ['accountId', 'provider'] }],
});
export type ProviderKey = InferEntity<typeof ProviderKeySchema>;

export const RUN_MODELS = ['free', 'per_run'] as const;
export const LISTINGS = ['public', 'unlisted', 'none'] as const;
export const CREDENTIAL_MODES = ['service_hosted', 'byok'] as const;

export const WorkflowSchema = defineEntity({
  name: 'Workflow',
  tableName: 'workflows',
  properties: {
    id: p.uuid().primary(),
    ownerId: p.manyToOne(AccountSchema).mapToPk().fieldName('owner_id'),
    name: p.text(),
    description: p.text().nullable(),
    serviceCode: p.string().nullable(),
    runModel: p.enum(RUN_MODELS),
    priceUsd: money().default('0'),
    listing: p.enum(LISTINGS),
    unlock: p.boolean().default(false),
    apiAccess: p.boolean().default(true),
    credentialMode: p.enum(CREDENTIAL_MODES),
    computeLimitUsd: money().nullable(),
    activeVersionId: p.uuid().nullable(),
    /** The catalog's figure; completions since are counted in WorkflowRunTally, and runsTotal adds both. */
    runsCount: p.integer().default(0),
    /** Completed runs: runsCount plus the workflow's tallies, read in the same statement as the workflow. */
    runsTotal: p
      .integer()
      .formula((columns) => `(${columns.runsCount} + coalesce((select sum(t.runs) from workflow_run_tallies t where t.workflow_id = ${columns.id}), 0))::int`)
      .lazy(),
    createdAt: createdAt(),
  },
  indexes: [{ properties: ['ownerId'] }, { properties: ['name', 'id'] }],
});
export type Workflow = InferEntity<typeof WorkflowSchema>;

/**
 * Completed runs of a workflow counted on several rows (shards) instead of `workflows.runs_count` alone,
 * so concurrent completions do not queue on the workflow's row: a completion adds one to the shard of
 * its database session. A workflow's runsCount is its runs_count (the catalog's figure) plus its tallies.
 */
export const WorkflowRunTallySchema = defineEntity({
  name: 'WorkflowRunTally',
  tableName: 'workflow_run_tallies',
  properties: {
    workflowId: p.manyToOne(WorkflowSchema).mapToPk().fieldName('workflow_id').primary().deleteRule('cascade'),
    shard: p.smallint().primary(),
    runs: p.integer().default(0),
  },
});
export type WorkflowRunTally = InferEntity<typeof WorkflowRunTallySchema>;

/** Immutable: a version's graph never changes once written. */
export const WorkflowVersionSchema = defineEntity({
  name: 'WorkflowVersion',
  tableName: 'workflow_versions',
  properties: {
    id: p.uuid().primary(),
    workflowId: p.manyToOne(WorkflowSchema).mapToPk().fieldName('workflow_id').deleteRule('cascade'),
    label: p.string(),
    graph: p.json<Graph>(),
    /** sha256 of the canonical graph JSON, so a reload can tell "same version" from "changed version". */
    graphHash: p.string().length(64),
    createdAt: createdAt(),
  },
  uniques: [{ properties: ['workflowId', 'label'] }],
  indexes: [{ properties: ['workflowId', 'createdAt'] }],
});
export type WorkflowVersion = InferEntity<typeof WorkflowVersionSchema>;

/** A purchase pins the buyer to one version until they accept an update. */
export const PurchaseSchema = defineEntity({
  name: 'Purchase',
  tableName: 'purchases',
  properties: {
    id: p.uuid().primary(),
    accountId: p.manyToOne(AccountSchema).mapToPk().fieldName('account_id').deleteRule('cascade'),
    workflowId: p.manyToOne(WorkflowSchema).mapToPk().fieldName('workflow_id').deleteRule('cascade'),
    versionId: p.manyToOne(WorkflowVersionSchema).mapToPk().fieldName('version_id'),
    createdAt: createdAt(),
    updatedAt: createdAt(),
  },
  uniques: [{ properties: ['accountId', 'workflowId'] }],
});
export type Purchase = InferEntity<typeof PurchaseSchema>;

export const BundleSchema = defineEntity({
  name: 'Bundle',
  tableName: 'bundles',
  properties: {
    id: p.uuid().primary(),
    accountId: p.manyToOne(AccountSchema).mapToPk().fieldName('account_id').deleteRule('cascade'),
    workflowId: p.manyToOne(WorkflowSchema).mapToPk().fieldName('workflow_id').deleteRule('cascade'),
    versionId: p.manyToOne(WorkflowVersionSchema).mapToPk().fieldName('version_id'),
    runsTotal: p.integer(),
    runsLeft: p.integer(),
    usdPerRun: money(),
    createdAt: createdAt(),
  },
  uniques: [{ properties: ['accountId', 'workflowId', 'versionId'] }],
});
export type Bundle = InferEntity<typeof BundleSchema>;

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
    outputs: p.json<RunOutputField[]>().default('[]').onCreate(() => []),
    cancelRequested: p.boolean().default(false),
    lastSequence: p.integer().default(0),
    engine: p.string().default('embedded'),
    leaseOwner: p.string().nullable(),
    leaseUntil: p.datetime().nullable(),
    /** The caller's labels from POST /runs (src/domain/run-metadata.ts): shown on every view, filtered by GET /runs. */
    metadata: p.json<Record<string, string>>().default('{}').onCreate(() => ({})),
    /** The `Cancel-After` deadline: past it a run that is not terminal is cancelled (src/runs/cancel-run.ts). */
    deadline: p.datetime().nullable(),
    /** The W3C trace context the run was started in (docs/tracing.md); null when tracing was off. */
    traceContext: p.json<{ traceparent: string; tracestate?: string }>().nullable(),
    createdAt: createdAt(),
    queuedAt: createdAt(),
    /** Place number in the queue's line (src/runs/queue-line.ts). */
    queueSeq: p.bigint('number').nullable(),
    startedAt: p.datetime().nullable(),
    completedAt: p.datetime().nullable(),
    updatedAt: createdAt(),
  },
  indexes: [
    { name: 'runs_account_created_idx', properties: ['accountId', 'createdAt', 'id'] },
    { name: 'runs_api_key_created_idx', properties: ['apiKeyId', 'createdAt'] },
    // A workflow's runs, newest first: the internal GraphQL search by workflow (src/graphql/queries/runs.ts).
    { name: 'runs_workflow_created_idx', properties: ['workflowId', 'createdAt', 'id'] },
    // The line in its order, its unnumbered tail, and numbered runs that left it (queue-line.ts).
    { name: 'runs_queue_line_idx', properties: ['queueSeq', 'queuedAt', 'id'], where: queuedRun() },
    { name: 'runs_queue_fresh_idx', properties: ['queuedAt', 'id'], where: `${queuedRun()} and queue_seq is null` },
    { name: 'runs_queue_left_idx', properties: ['queueSeq'], where: leftQueue() },
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

export const WebhookEndpointSchema = defineEntity({
  name: 'WebhookEndpoint',
  tableName: 'webhook_endpoints',
  properties: {
    id: p.uuid().primary(),
    accountId: p.manyToOne(AccountSchema).mapToPk().fieldName('account_id').deleteRule('cascade'),
    url: p.text(),
    /** The Standard Webhooks secret, encrypted (it must be recoverable to sign). */
    secretCiphertext: p.text(),
    events: p.json<string[]>().nullable(),
    createdAt: createdAt(),
  },
  uniques: [{ properties: ['accountId', 'url'] }],
});
export type WebhookEndpoint = InferEntity<typeof WebhookEndpointSchema>;

export const WEBHOOK_DELIVERY_STATUSES = ['pending', 'delivered', 'failed'] as const;

/**
 * The webhook outbox: which run's which event, written with the terminal state, drained by the delivery
 * worker; the body is rendered from the run at each attempt (docs/design/webhooks.md), `createdAt` its timestamp.
 */
export const WebhookDeliverySchema = defineEntity({
  name: 'WebhookDelivery',
  tableName: 'webhook_deliveries',
  properties: {
    id: p.string().primary(),
    endpointId: p.manyToOne(WebhookEndpointSchema).mapToPk().fieldName('endpoint_id').deleteRule('cascade'),
    runId: p.manyToOne(RunSchema).mapToPk().fieldName('run_id').deleteRule('cascade'),
    eventType: p.string(),
    status: p.enum(WEBHOOK_DELIVERY_STATUSES).default('pending'),
    attempts: p.integer().default(0),
    nextAttemptAt: p.datetime(),
    lastStatusCode: p.integer().nullable(),
    lastError: p.text().nullable(),
    createdAt: createdAt(),
    deliveredAt: p.datetime().nullable(),
  },
  indexes: [{ name: 'webhook_deliveries_due_idx', properties: ['status', 'nextAttemptAt'] }],
});
export type WebhookDelivery = InferEntity<typeof WebhookDeliverySchema>;

/** Service-wide settings loaded from the catalog (pricing), shared by the API and worker processes. */
export const SettingSchema = defineEntity({
  name: 'Setting',
  tableName: 'settings',
  properties: {
    key: p.string().primary(),
    value: p.json<JsonValue>(),
    updatedAt: createdAt(),
  },
});
export type Setting = InferEntity<typeof SettingSchema>;

export const entities = [
  SettingSchema,
  AccountSchema,
  WalletSchema,
  LedgerEntrySchema,
  ApiKeySchema,
  ProviderKeySchema,
  WorkflowSchema,
  WorkflowRunTallySchema,
  ApiKeyRateWindowSchema,
  StreamSlotTotalSchema,
  StreamSlotLeaseSchema,
  WorkflowVersionSchema,
  PurchaseSchema,
  BundleSchema,
  RunSchema,
  RunEventBatchSchema,
  RunEventSchema,
  RunLabelSchema,
  RunSecretSchema,
  IdempotencyRecordSchema,
  WebhookEndpointSchema,
  WebhookDeliverySchema,
];
