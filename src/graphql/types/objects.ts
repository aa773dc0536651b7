import 'reflect-metadata';
import { Directive, Field, ID, InputType, Int, ObjectType } from 'type-graphql';
import {
  BillingStatus,
  CredentialMode,
  LedgerKind,
  Listing,
  Outcome,
  QueueState,
  RunModel,
  RunStatus,
  SpendCapWindow,
  WebhookDeliveryStatus,
} from './enums.ts';
import { DateTimeScalar, DecimalScalar, JsonScalar } from './scalars.ts';

/**
 * The object types of the internal graph. Every decorator names its GraphQL type explicitly (tsx
 * emits no decorator metadata). Workflow, WorkflowVersion, Account, Wallet, LedgerEntry, ApiKey,
 * WebhookEndpoint, WebhookDelivery, Purchase and RunEvent map their entities (src/db/entities) field by
 * field: a field named unlike its property names the property (`{ name }`), and a field the entity does
 * not hold is a field resolver in ../resolvers. Run maps the REST view of its entity (queries/runs.ts).
 * Relations and paged children (Run.events, Run.account, Workflow.versions, Account.ledger, …) are field
 * resolvers, batched by DataLoaders. Field names follow the REST resources.
 */

@ObjectType('Pagination', { description: 'The REST pagination fields.' })
@Directive('@shareable')
export class Pagination {
  @Field(() => Int) offset!: number;
  @Field(() => Int) limit!: number;
  @Field(() => Boolean) hasMore!: boolean;
}

@ObjectType('RunQueue', { description: 'Where a pending run waits (REST Run.queue).' })
export class RunQueueType {
  @Field(() => QueueState) state!: QueueState;
  @Field(() => Int, { description: '1 = next; 0 while starting.' }) position!: number;
  @Field(() => Int, { nullable: true }) etaSeconds!: number | null;
}

@ObjectType('RunEvent', { description: "One entry of a run's event log (REST RunEvent)." })
export class RunEventType {
  @Field(() => ID) runId!: string;
  @Field(() => String) type!: string;
  @Field(() => Int, { description: 'Starts at 1, gap-free per run.' }) sequence!: number;
  @Field(() => DateTimeScalar) ts!: string;
  @Field(() => String, { nullable: true }) nodeId!: string | null;
  @Field(() => JsonScalar, { description: 'Only text, status and reason.' }) data!: Record<string, string>;
}

@ObjectType('Run', { description: 'A run (REST Run) with the internal extras: account, creation time, events.' })
@Directive('@key(fields: "id")')
export class RunType {
  @Field(() => ID) id!: string;
  @Field(() => RunStatus) status!: RunStatus;
  @Field(() => String, { nullable: true, description: 'Why it failed (failed runs only).' }) reason!: string | null;
  @Field(() => Boolean) suspended!: boolean;
  @Field(() => String, { nullable: true, description: 'wait_timer or wait_signal while suspended.' }) suspendReason!: string | null;
  @Field(() => ID) workflowId!: string;
  @Field(() => ID) workflowVersionId!: string;
  @Field(() => DateTimeScalar, { nullable: true }) startedAt!: string | null;
  @Field(() => DateTimeScalar, { nullable: true }) completedAt!: string | null;
  @Field(() => DecimalScalar, { nullable: true }) displayedChargeUsd!: string | null;
  @Field(() => BillingStatus) billingStatus!: BillingStatus;
  @Field(() => Outcome, { nullable: true }) outcome!: Outcome | null;
  @Field(() => JsonScalar, { description: 'RunOutputField[] exactly as REST returns it; [] until outputs exist.' }) outputs!: unknown;
  @Field(() => JsonScalar, { description: "The caller's metadata (string keys to string values) exactly as REST returns it; {} when none." })
  metadata!: Record<string, string>;
  @Field(() => DateTimeScalar, { nullable: true, description: 'When the run is cancelled unless it ended (Cancel-After), or null.' })
  deadline!: string | null;
  @Field(() => ID, { nullable: true, description: 'The run this one replays (POST /runs/{id}/replay), or null.' }) replayOf!: string | null;
  @Field(() => DateTimeScalar, { nullable: true, description: 'A delayed start (Start-After, startAt): when the run enters the queue; null: at acceptance.' })
  scheduledFor!: string | null;
  @Field(() => String, { description: 'high, normal or low: admission takes higher first (docs/design/flow-control.md).' }) priority!: string;
  @Field(() => String, { nullable: true, description: "The caller's concurrency key (its customer or tenant), or null." }) concurrencyKey!: string | null;
  @Field(() => ID) accountId!: string;
  @Field(() => String) accountHandle!: string;
  @Field(() => DateTimeScalar) createdAt!: string;
  @Field(() => Int, { description: 'Sequence of the newest event.' }) lastSequence!: number;
}

@ObjectType('RunPage')
export class RunPage {
  @Field(() => [RunType]) runs!: RunType[];
  @Field(() => Pagination) pagination!: Pagination;
}

@ObjectType('Workflow', { description: "A workflow as the catalog defines it (not a caller's view)." })
@Directive('@key(fields: "id")')
export class WorkflowType {
  @Field(() => ID) id!: string;
  @Field(() => String) name!: string;
  @Field(() => String, { nullable: true }) description!: string | null;
  @Field(() => String, { nullable: true }) serviceCode!: string | null;
  @Field(() => ID) ownerId!: string;
  @Field(() => String) ownerHandle!: string;
  @Field(() => RunModel) runModel!: RunModel;
  @Field(() => DecimalScalar, { description: 'Creator price per run (per_run).' }) priceUsd!: string;
  @Field(() => Listing) listing!: Listing;
  @Field(() => Boolean, { description: 'Legacy unlock listing.' }) unlock!: boolean;
  @Field(() => Boolean, { name: 'apiAccessAllowed' }) apiAccess!: boolean;
  @Field(() => CredentialMode) credentialMode!: CredentialMode;
  @Field(() => DecimalScalar, { nullable: true }) computeLimitUsd!: string | null;
  @Field(() => ID, { nullable: true }) activeVersionId!: string | null;
  @Field(() => Int, { name: 'runsCount' }) runsTotal!: number;
  @Field(() => DateTimeScalar) createdAt!: string;
}

@ObjectType('WorkflowPage')
export class WorkflowPage {
  @Field(() => [WorkflowType]) workflows!: WorkflowType[];
  @Field(() => Pagination) pagination!: Pagination;
}

@ObjectType('WorkflowVersion')
@Directive('@key(fields: "id")')
export class WorkflowVersionType {
  @Field(() => ID) id!: string;
  @Field(() => ID) workflowId!: string;
  @Field(() => String) label!: string;
  @Field(() => DateTimeScalar) createdAt!: string;
  @Field(() => Int) inputCount!: number;
  @Field(() => Boolean) isActive!: boolean;
}

@ObjectType('Wallet')
export class WalletType {
  @Field(() => DecimalScalar, { description: 'Available balance.' }) balanceUsd!: string;
  @Field(() => DecimalScalar, { description: 'Held for runs in flight.' }) heldUsd!: string;
  @Field(() => DateTimeScalar) updatedAt!: string;
}

@ObjectType('LedgerEntry', { description: 'Append-only wallet history; amountUsd is signed.' })
export class LedgerEntryType {
  @Field(() => ID) id!: string;
  @Field(() => ID, { nullable: true }) runId!: string | null;
  @Field(() => LedgerKind) kind!: LedgerKind;
  @Field(() => DecimalScalar) amountUsd!: string;
  @Field(() => DecimalScalar) balanceAfterUsd!: string;
  @Field(() => String, { nullable: true }) note!: string | null;
  @Field(() => DateTimeScalar) createdAt!: string;
}

@ObjectType('SpendCap')
export class SpendCapType {
  @Field(() => SpendCapWindow) window!: SpendCapWindow;
  @Field(() => DecimalScalar) usd!: string;
}

@ObjectType('ApiKey', { description: 'API key metadata. The secret and its hash are never exposed.' })
export class ApiKeyType {
  @Field(() => ID) id!: string;
  @Field(() => String, { description: 'First characters of the secret, to recognise the key.' }) prefix!: string;
  @Field(() => [String]) scopes!: string[];
  @Field(() => Int) rateLimitPerMinute!: number;
  @Field(() => SpendCapType, { nullable: true }) spendCap!: SpendCapType | null;
  @Field(() => DateTimeScalar, { nullable: true }) expiresAt!: string | null;
  @Field(() => Boolean) revoked!: boolean;
  @Field(() => DateTimeScalar) createdAt!: string;
}

@ObjectType('WebhookEndpoint', { description: 'A webhook endpoint (its signing secret is never exposed).' })
export class WebhookEndpointType {
  @Field(() => ID) id!: string;
  @Field(() => String) url!: string;
  @Field(() => [String], { nullable: true, description: 'null: every terminal event.' }) events!: string[] | null;
  @Field(() => DateTimeScalar) createdAt!: string;
}

@ObjectType('WebhookDelivery', { description: 'One outbox entry: a webhook call and its retries.' })
export class WebhookDeliveryType {
  @Field(() => ID, { description: 'The webhook-id header value.' }) id!: string;
  @Field(() => ID) endpointId!: string;
  @Field(() => String) endpointUrl!: string;
  @Field(() => ID) runId!: string;
  @Field(() => String) eventType!: string;
  @Field(() => WebhookDeliveryStatus) status!: WebhookDeliveryStatus;
  @Field(() => Int) attempts!: number;
  @Field(() => DateTimeScalar) nextAttemptAt!: string;
  @Field(() => Int, { nullable: true }) lastStatusCode!: number | null;
  @Field(() => String, { nullable: true }) lastError!: string | null;
  @Field(() => DateTimeScalar) createdAt!: string;
  @Field(() => DateTimeScalar, { nullable: true }) deliveredAt!: string | null;
}

@ObjectType('Purchase', { description: 'A purchase pins its buyer to a version until they accept an update.' })
export class PurchaseType {
  @Field(() => ID) workflowId!: string;
  @Field(() => ID, { name: 'pinnedVersionId' }) versionId!: string;
  @Field(() => ID, { nullable: true }) activeVersionId!: string | null;
  @Field(() => Boolean) updateAvailable!: boolean;
  @Field(() => DateTimeScalar) createdAt!: string;
  @Field(() => DateTimeScalar) updatedAt!: string;
}

@ObjectType('Account')
@Directive('@key(fields: "id")')
export class AccountType {
  @Field(() => ID) id!: string;
  @Field(() => String) handle!: string;
  @Field(() => Boolean) restricted!: boolean;
  @Field(() => Boolean) listingsPaused!: boolean;
  @Field(() => Int, { nullable: true }) maxConcurrentRuns!: number | null;
  @Field(() => [String], { description: 'Connected integrations (provider ids).' }) connections!: string[];
  @Field(() => DateTimeScalar) createdAt!: string;
}

@InputType('ProviderCredentialInput')
export class ProviderCredentialInput {
  @Field(() => String) provider!: string;
  @Field(() => String) apiKey!: string;
}
