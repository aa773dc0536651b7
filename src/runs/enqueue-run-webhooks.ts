import type { Em } from '../db/orm.ts';
import { query } from '../db/statement.ts';
import { ENQUEUE_RUN_WEBHOOKS } from '../sql/webhook-deliveries.ts';

export const TERMINAL_WEBHOOK_EVENTS = ['run.completed', 'run.failed', 'run.cancelled'] as const;

/**
 * Writes one outbox row per subscribed endpoint (events filter null = every terminal event), in the
 * transaction that makes the run terminal, so a webhook is sent if and only if the run really ended.
 * The body is fixed now: retries send the same bytes under the same `webhook-id`.
 */
export async function enqueueRunWebhooks(tx: Em, accountId: string, runId: string, type: string, run: unknown): Promise<number> {
  const payload = JSON.stringify({ type, timestamp: new Date().toISOString(), data: run });
  const rows = await query(tx, ENQUEUE_RUN_WEBHOOKS, [runId, type, payload, accountId]);
  return rows.length;
}
