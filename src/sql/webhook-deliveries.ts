import { statement } from '../db/statement.ts';
import { RunSchema, WebhookDeliverySchema, WebhookEndpointSchema } from '../db/entities/index.ts';

/** Endpoint `e` receives event `event` (an SQL text expression): its events filter is null (every terminal event) or holds it. */
export const endpointTakes = (e: string, event: string): string => `(${e}.events is null or ${e}.events @> to_jsonb(${event}))`;

/** A timestamptz (an SQL expression) as JavaScript's `toISOString` writes it (milliseconds, truncated; `Z`), or null. */
const isoText = (t: string) => `to_char(${t} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/**
 * The body of run `r`'s terminal webhook (an SQL text), for a statement that writes the outbox itself
 * (src/sql/finish-runs-in-memory.ts): `{ type, timestamp, data }` with `data` the run as toPublicRun
 * (src/runs/run-row.ts) shows it, in its key order; test/db/finish-runs-in-memory.test.ts holds the two alike.
 */
export const runWebhookPayload = (r: string) => `json_build_object(
    'type', 'run.' || ${r}.status, 'timestamp', ${isoText('clock_timestamp()')},
    'data', json_build_object(
      'id', ${r}.id, 'status', ${r}.status, 'reason', case when ${r}.status = 'failed' then coalesce(${r}.reason, 'the run failed') end,
      'suspended', ${r}.status = 'suspended', 'workflowId', ${r}.workflow_id, 'workflowVersionId', ${r}.version_id,
      'startedAt', ${isoText(`${r}.started_at`)}, 'completedAt', ${isoText(`${r}.completed_at`)},
      'displayedChargeUsd', trim_scale(${r}.charge_usd), 'billingStatus', ${r}.billing_status,
      'outcome', case when ${r}.status = 'completed' then ${r}.outcome end, 'queue', null, 'outputs', ${r}.outputs))::text`;

/**
 * The outbox rows of a run's terminal event: one per endpoint of `account` subscribed to `event`
 * (events filter null = every terminal event), pending and due now. SQL expressions; `from` (optional)
 * adds a table or CTE the values are read from.
 */
export const outboxInsert = (a: { run: string; event: string; payload: string; account: string; from?: string }) =>
  `insert into webhook_deliveries (id, endpoint_id, run_id, event_type, payload, status, attempts, next_attempt_at, created_at)
   select 'msg_' || replace(gen_random_uuid()::text, '-', ''), e.id, ${a.run}, ${a.event}, ${a.payload}, 'pending', 0, now(), now()
     from webhook_endpoints e${a.from ? `, ${a.from}` : ''}
    where e.account_id = ${a.account} and ${endpointTakes('e', a.event)}`;

/** The outbox rows of a run's terminal event (outboxInsert): $1 run id, $2 event type, $3 payload (JSON text), $4 account id. */
export const ENQUEUE_RUN_WEBHOOKS = statement(
  'enqueue_run_webhooks',
  `${outboxInsert({ run: '$1', event: '$2::text', payload: '$3', account: '$4' })}
   returning id`,
  [WebhookDeliverySchema, WebhookEndpointSchema],
);

/*
 * Delivery (src/services/webhooks/deliver-webhooks.ts, docs/design/webhooks.md). "Now" is a parameter
 * (an ISO time, for tests) or null for the database clock. An outcome is written only if the row still
 * has the attempts count seen at claim time: a worker whose lease ran out cannot overwrite a newer attempt.
 */

/**
 * Claims up to $2 due pending deliveries (oldest due first, skipping rows another worker holds) and
 * leases them by moving next_attempt_at to now + $3 ms; with each, its endpoint and the run's trace
 * context. $1 now or null.
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
      returning d.id, d.endpoint_id, d.run_id, d.event_type, d.payload, d.attempts
   )
   select c.id, c.endpoint_id, c.run_id, c.event_type, c.payload, c.attempts, e.url, e.secret_ciphertext, e.account_id,
          (select r.trace_context from runs r where r.id = c.run_id) as trace_context
     from claimed c join webhook_endpoints e on e.id = c.endpoint_id`,
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
