import 'reflect-metadata';
import { registerEnumType } from 'type-graphql';

/**
 * Enum values are GraphQL's upper case; their internal values are the database / REST strings, so
 * resolvers pass rows through unchanged and filters arrive as the stored value.
 */

export enum RunStatus {
  PENDING = 'pending',
  RUNNING = 'running',
  SUSPENDED = 'suspended',
  COMPLETED = 'completed',
  FAILED = 'failed',
  CANCELLED = 'cancelled',
}
registerEnumType(RunStatus, { name: 'RunStatus', description: 'A run\'s status (REST Run.status).' });

export enum Outcome {
  COMPLETED = 'completed',
  COMPLETED_WITH_ISSUES = 'completed_with_issues',
}
registerEnumType(Outcome, { name: 'Outcome' });

export enum BillingStatus {
  PENDING = 'pending',
  SETTLED = 'settled',
  NOT_CHARGED = 'not_charged',
}
registerEnumType(BillingStatus, { name: 'BillingStatus' });

export enum QueueState {
  WAITING = 'waiting',
  STARTING = 'starting',
}
registerEnumType(QueueState, { name: 'QueueState' });

export enum RunModel {
  FREE = 'free',
  PER_RUN = 'per_run',
}
registerEnumType(RunModel, { name: 'RunModel' });

export enum Listing {
  PUBLIC = 'public',
  UNLISTED = 'unlisted',
  NONE = 'none',
}
registerEnumType(Listing, { name: 'Listing' });

export enum CredentialMode {
  SERVICE_HOSTED = 'service_hosted',
  BYOK = 'byok',
}
registerEnumType(CredentialMode, { name: 'CredentialMode' });

export enum SpendCapWindow {
  DAILY = 'daily',
  MONTHLY = 'monthly',
  LIFETIME = 'lifetime',
}
registerEnumType(SpendCapWindow, { name: 'SpendCapWindow' });

export enum LedgerKind {
  CREDIT = 'credit',
  HOLD = 'hold',
  RELEASE = 'release',
  CHARGE = 'charge',
  BUNDLE_CHARGE = 'bundle_charge',
  UNPAID = 'unpaid',
}
registerEnumType(LedgerKind, { name: 'LedgerKind' });

export enum WebhookDeliveryStatus {
  PENDING = 'pending',
  DELIVERED = 'delivered',
  FAILED = 'failed',
}
registerEnumType(WebhookDeliveryStatus, { name: 'WebhookDeliveryStatus' });
