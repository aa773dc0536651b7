import {
  AccountSchema,
  ApiKeyRateWindowSchema,
  ApiKeyRunWindowSchema,
  ApiKeySchema,
  ProviderKeySchema,
  StreamSlotLeaseSchema,
  StreamSlotTotalSchema,
} from './accounts.ts';
import { WorkflowRunTallySchema, WorkflowSchema, WorkflowVersionSchema } from './catalog.ts';
import { BundleSchema, LedgerEntrySchema, PurchaseSchema, WalletSchema } from './money.ts';
import { RunLabelSchema } from './run-labels.ts';
import { IdempotencyRecordSchema, RunEventBatchSchema, RunEventSchema, RunSchema, RunSecretSchema } from './runs.ts';
import { SettingSchema } from './settings.ts';
import { WebhookDeliverySchema, WebhookEndpointSchema } from './webhooks.ts';

export * from './accounts.ts';
export * from './catalog.ts';
export * from './money.ts';
export * from './runs.ts';
export * from './settings.ts';
export * from './webhooks.ts';
export { RunLabelSchema, type RunLabel } from './run-labels.ts';

/**
 * The whole data model. MikroORM owns the schema and the migrations from it, and the internal GraphQL
 * reads through these entities (src/graphql/queries: `em.find` and the QueryBuilder on a per-request
 * EntityManager). The services' run, wallet and acceptance paths are statements of their own in
 * src/sql. Foreign keys are mapped to their primary key values (`mapToPk`) because those statements read
 * and fence rows by id; a relation can still be filtered on through them (`{ ownerId: { handle } }`
 * joins the account). Money columns are numeric(18,6) and surface as decimal strings, never floats.
 * The entities by job: ./accounts.ts, ./catalog.ts, ./money.ts, ./runs.ts (and ./run-labels.ts),
 * ./webhooks.ts, ./settings.ts. Column helpers: ./columns.ts; the database functions: ./routines.ts.
 */
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
  ApiKeyRunWindowSchema,
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
