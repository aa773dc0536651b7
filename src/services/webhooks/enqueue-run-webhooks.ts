import type { Em } from '../../db/orm.ts';
import { prepared } from '../../db/prepared.ts';

export const TERMINAL_WEBHOOK_EVENTS = ['run.completed', 'run.failed', 'run.cancelled'] as const;

/**
 * Writes one outbox row per subscribed endpoint (events filter null = every terminal event), in the
 * transaction that makes the run terminal, so a webhook is sent if and only if the run really ended.
 * The body is fixed now: retries send the same bytes under the same `webhook-id`.
 */
export async function enqueueRunWebhooks(tx: Em, accountId: string, runId: string, type: string, run: unknown): Promise<number> {
  const payload = JSON.stringify({ type, timestamp: new Date().toISOString(), data: run });
  const rows = await tx.execute<{ id: string }[]>(
    prepared(`insert into webhook_deliveries (id, endpoint_id, run_id, event_type, payload, status, attempts, next_attempt_at, created_at)
     select 'msg_' || replace(gen_random_uuid()::text, '-', ''), e.id, ?, ?, ?, 'pending', 0, now(), now()
       from webhook_endpoints e
      where e.account_id = ? and (e.events is null or e.events @> to_jsonb(?::text))
     returning id`),
    [runId, type, payload, accountId, type],
  );
  return rows.length;
}
