import 'reflect-metadata';
import { registerEnumType } from 'type-graphql';
import { CREDENTIAL_MODES, LEDGER_KINDS, LISTINGS, RUN_MODELS, SPEND_WINDOWS, WEBHOOK_DELIVERY_STATUSES } from '../../db/entities/index.ts';
import * as values from '../../domain/run-status.ts';

/**
 * The GraphQL enums, built from the value lists the entities and src/domain/run-status.ts declare, so
 * they cannot drift from the stored values. GraphQL names are the values in upper case; their internal
 * values are the database / REST strings, so resolvers pass rows through unchanged and filters arrive
 * as the stored value. Each enum is an object (`RunStatus.PENDING === 'pending'`) and a type of the same
 * name (the value union).
 */
type EnumObject<T extends readonly string[]> = { readonly [V in T[number] as Uppercase<V>]: V };

function graphqlEnum<const T extends readonly string[]>(list: T, name: string, description?: string): EnumObject<T> {
  const object = Object.fromEntries(list.map((value) => [value.toUpperCase(), value])) as EnumObject<T>;
  registerEnumType(object, { name, description });
  return object;
}

export const RunStatus = graphqlEnum(values.RUN_STATUSES, 'RunStatus', "A run's status (REST Run.status).");
export type RunStatus = values.RunStatus;
export const Outcome = graphqlEnum(values.OUTCOMES, 'Outcome');
export type Outcome = values.Outcome;
export const BillingStatus = graphqlEnum(values.BILLING_STATUSES, 'BillingStatus');
export type BillingStatus = values.BillingStatus;
export const QueueState = graphqlEnum(values.QUEUE_STATES, 'QueueState');
export type QueueState = values.QueueState;
export const RunModel = graphqlEnum(RUN_MODELS, 'RunModel');
export type RunModel = (typeof RUN_MODELS)[number];
export const Listing = graphqlEnum(LISTINGS, 'Listing');
export type Listing = (typeof LISTINGS)[number];
export const CredentialMode = graphqlEnum(CREDENTIAL_MODES, 'CredentialMode');
export type CredentialMode = (typeof CREDENTIAL_MODES)[number];
export const SpendCapWindow = graphqlEnum(SPEND_WINDOWS, 'SpendCapWindow');
export type SpendCapWindow = (typeof SPEND_WINDOWS)[number];
export const LedgerKind = graphqlEnum(LEDGER_KINDS, 'LedgerKind');
export type LedgerKind = (typeof LEDGER_KINDS)[number];
export const WebhookDeliveryStatus = graphqlEnum(WEBHOOK_DELIVERY_STATUSES, 'WebhookDeliveryStatus');
export type WebhookDeliveryStatus = (typeof WEBHOOK_DELIVERY_STATUSES)[number];
