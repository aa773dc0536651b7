import { query, statement, type StatementEm } from '../../src/db/statement.ts';
import { outboxInsert } from '../../src/sql/webhook-deliveries.ts';

/**
 * The outbox rows of a run's terminal event without ending the run (delivery tests): the same insert
 * FINISH_RUNS writes (outboxInsert). $1 run id, $2 event type, $3 account id.
 */
const ENQUEUE_RUN_WEBHOOKS = statement('test_enqueue_run_webhooks', `${outboxInsert({ run: '$1', event: '$2::text', account: '$3' })} returning id`);

/** Writes the outbox rows of `type` for the run; returns how many. */
export async function enqueueRunWebhooks(em: StatementEm, accountId: string, runId: string, type: string): Promise<number> {
  return (await query(em, ENQUEUE_RUN_WEBHOOKS, [runId, type, accountId])).length;
}
