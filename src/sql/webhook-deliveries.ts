import { statement } from '../db/statement.ts';
import { RunSchema, WebhookDeliverySchema, WebhookEndpointSchema } from '../db/entities/index.ts';
import { runColumnsOf } from './runs.ts';

/** Endpoint `e` receives event `event` (an SQL text expression): its events filter is null (every terminal event) or holds it. */
export const endpointTakes = (e: string, event: string): string => `(${e}.events is null or ${e}.events @> to_jsonb(${event}))`;

/**
 * The outbox rows of a run's terminal event: one per endpoint of `account` subscribed to `event`
 * (events filter null = every terminal event), pending and due now. They record the run, the event and
 * its time (clock_timestamp(): after the run's completed_at), never a body: the sender renders that from
 * the run (CLAIM_WEBHOOK_DELIVERIES). SQL expressions; `from` (optional) adds a table or CTE the values are read from.
 */
export const outboxInsert = (a: { run: string; event: string; account: string; from?: string }) =>
  `insert into webhook_deliveries (id, endpoint_id, run_id, event_type, status, attempts, next_attempt_at, created_at)
   select 'msg_' || replace(gen_random_uuid()::text, '-', ''), e.id, ${a.run}, ${a.event}, 'pending', 0, now(), clock_timestamp()
     from webhook_endpoints e${a.from ? `, ${a.from}` : ''}
    where e.account_id = ${a.account} and ${endpointTakes('e', a.event)}`;

/*
 * Delivery (src/services/webhooks/deliver-webhooks.ts, docs/design/webhooks.md). "Now" is a parameter
 * (an ISO time, for tests) or null for the database clock. An outcome is written only if the row still
 * has the attempts count seen at claim time: a worker whose lease ran out cannot overwrite a newer attempt.
 */

/**
 * Claims up to $2 due pending deliveries (oldest due first, skipping rows another worker holds) and
 * leases them by moving next_attempt_at to now + $3 ms; with each, its endpoint, and its run as the API
 * shows it (RUN_COLUMNS, from which the body is rendered) with its trace context. $1 now or null.
 */
export const CLAIM_WEBHOOK_DELIVERIES = statement(
  'claim_webhook_deliveries',
  `with due as (
     select id from webhook_deliveries
      where status = 'pending' and next_attempt_at <= coalesce($1::timestamptz, now())
      order by next_attempt_at, id
      limit $2::bigint
      for update skip locked
   ), claimed as (
     update webhook_deliveries d
        set next_attempt_at = coalesce($1::timestamptz, now()) + ($3::float8 * interval '1 millisecond')
       from due
      where d.id = due.id
      returning d.id, d.endpoint_id, d.run_id, d.event_type, d.attempts, d.created_at
   )
   select c.id as delivery_id, c.endpoint_id, c.event_type, c.attempts, c.created_at as enqueued_at, e.url, e.secret_ciphertext,
          r.trace_context, ${runColumnsOf('r')}
     from claimed c join webhook_endpoints e on e.id = c.endpoint_id join runs r on r.id = c.run_id`,
  [WebhookDeliverySchema, RunSchema, WebhookEndpointSchema],
);

/** Delivered, with its lag from enqueue (seconds): $1 status code, $2 now or null, $3 delivery id, $4 attempts seen at claim. */
export const RECORD_WEBHOOK_DELIVERED = statement(
  'record_webhook_delivered',
  `update webhook_deliveries
      set status = 'delivered', attempts = attempts + 1, last_status_code = $1::int, last_error = null,
          delivered_at = coalesce($2::timestamptz, now())
    where id = $3 and status = 'pending' and attempts = $4::int
    returning extract(epoch from delivered_at - created_at)::float8 as lag`,
  [WebhookDeliverySchema],
);

/** Given up: $1 status code or null, $2 error, $3 delivery id, $4 attempts seen at claim. */
export const RECORD_WEBHOOK_FAILED = statement(
  'record_webhook_failed',
  `update webhook_deliveries
      set status = 'failed', attempts = attempts + 1, last_status_code = $1::int, last_error = $2
    where id = $3 and status = 'pending' and attempts = $4::int`,
  [WebhookDeliverySchema],
);

/**
 * Failed, to be retried $4 ms after now: $1 status code or null, $2 error, $3 now or null, $5 delivery
 * id, $6 attempts seen at claim.
 */
export const RECORD_WEBHOOK_RETRY = statement(
  'record_webhook_retry',
  `update webhook_deliveries
      set attempts = attempts + 1, last_status_code = $1::int, last_error = $2,
          next_attempt_at = coalesce($3::timestamptz, now()) + ($4::float8 * interval '1 millisecond')
    where id = $5 and status = 'pending' and attempts = $6::int`,
  [WebhookDeliverySchema],
);
