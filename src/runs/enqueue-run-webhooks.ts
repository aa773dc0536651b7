import type { Em } from '../db/orm.ts';
import { query } from '../db/statement.ts';
import { ENQUEUE_RUN_WEBHOOKS } from '../sql/webhook-deliveries.ts';

export const TERMINAL_WEBHOOK_EVENTS = ['run.completed', 'run.failed', 'run.cancelled'] as const;

/**
 * Writes one outbox row per subscribed endpoint (events filter null = every terminal event), in the
 * transaction that makes the run terminal, so a webhook is sent if and only if the run really ended.
 * The row names the run and the event; the sender renders the body from the run (docs/design/webhooks.md).
 */
export async function enqueueRunWebhooks(tx: Em, accountId: string, runId: string, type: string): Promise<number> {
  const rows = await query(tx, ENQUEUE_RUN_WEBHOOKS, [runId, type, accountId]);
  return rows.length;
}
