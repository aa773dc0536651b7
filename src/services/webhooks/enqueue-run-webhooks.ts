import { randomUUID } from 'node:crypto';
import type { Em } from '../../db/orm.ts';
import { json } from '../../db/sql.ts';

export const TERMINAL_WEBHOOK_EVENTS = ['run.completed', 'run.failed', 'run.cancelled'] as const;

/**
 * Writes one outbox row per subscribed endpoint, in the transaction that makes the run terminal, so a
 * webhook is sent if and only if the run really ended. The body is fixed now: retries send the same
 * bytes under the same `webhook-id`.
 */
export async function enqueueRunWebhooks(tx: Em, accountId: string, runId: string, type: string, run: unknown): Promise<number> {
  const endpoints = await tx.execute<{ id: string; events: unknown }[]>('select id, events from webhook_endpoints where account_id = ?', [accountId]);
  const now = new Date();
  const payload = JSON.stringify({ type, timestamp: now.toISOString(), data: run });
  let n = 0;
  for (const ep of endpoints) {
    const events = ep.events === null || ep.events === undefined ? null : json<string[]>(ep.events);
    if (events && !events.includes(type)) continue;
    await tx.execute(
      `insert into webhook_deliveries (id, endpoint_id, run_id, event_type, payload, status, attempts, next_attempt_at, created_at)
       values (?, ?, ?, ?, ?, 'pending', 0, now(), now())`,
      [`msg_${randomUUID().replaceAll('-', '')}`, ep.id, runId, type, payload],
    );
    n++;
  }
  return n;
}
