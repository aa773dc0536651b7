import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { createdAt } from './columns.ts';
import { AccountSchema } from './accounts.ts';
import { RunSchema } from './runs.ts';

/** Webhook endpoints and their deliveries (docs/design/webhooks.md). The model as a whole: ./index.ts. */

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
