import { query } from '../db/statement.ts';
import type { QueueSnapshot } from '../observability/deployment-metrics.ts';
import { QUEUE_SNAPSHOT } from '../sql/queue-snapshot.ts';
import { fork, type RunsDeps } from './deps.ts';

/** The queue depth is counted up to this (a scrape stays cheap however deep the queue grows). */
export const QUEUE_COUNT_CAP = 10_000;

/** The run queue across the deployment, for the /metrics gauges: one statement. */
export async function readQueueSnapshot(deps: Pick<RunsDeps, 'orm'>): Promise<QueueSnapshot> {
  type Row = {
    in_flight: number;
    queued: number;
    oldest: number;
    queued_0: number;
    queued_1: number;
    queued_2: number;
    longest_key_account: string | null;
    longest_key: string | null;
    longest_key_seconds: number | null;
  };
  const [row] = await query<Row>(fork(deps), QUEUE_SNAPSHOT, [QUEUE_COUNT_CAP]);
  return {
    inFlight: Number(row?.in_flight ?? 0),
    queued: Number(row?.queued ?? 0),
    oldestSeconds: Number(row?.oldest ?? 0),
    queuedByPriority: [Number(row?.queued_0 ?? 0), Number(row?.queued_1 ?? 0), Number(row?.queued_2 ?? 0)],
    longestWaitingKey:
      row?.longest_key == null
        ? null
        : { account: String(row.longest_key_account), concurrencyKey: row.longest_key, seconds: Number(row.longest_key_seconds ?? 0) },
  };
}
