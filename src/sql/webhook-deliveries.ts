import { statement } from '../db/statement.ts';

/**
 * One outbox row per endpoint of the account subscribed to the event (events filter null = every
 * terminal event). $1 run id, $2 event type, $3 payload (JSON text), $4 account id.
 */
export const ENQUEUE_RUN_WEBHOOKS = statement(
  'enqueue_run_webhooks',
  `insert into webhook_deliveries (id, endpoint_id, run_id, event_type, payload, status, attempts, next_attempt_at, created_at)
   select 'msg_' || replace(gen_random_uuid()::text, '-', ''), e.id, $1, $2::text, $3, 'pending', 0, now(), now()
     from webhook_endpoints e
    where e.account_id = $4 and (e.events is null or e.events @> to_jsonb($2::text))
   returning id`,
);
