import type { Logger } from 'pino';
import { TemporalUnreachableError, type RunWorkflowClient } from './client.ts';

/**
 * Temporal may come up after the service (docker compose, a restart of both): at start a process tries
 * to reach it `attempts` times, `intervalMs` apart, with one log line per failed try, and then gives up
 * with the unreachable error's one line. Other start failures (a missing namespace) are not retried:
 * waiting does not mend them. TEMPORAL_CONNECT_ATTEMPTS / TEMPORAL_CONNECT_INTERVAL_MS (docs/operations.md).
 */
export async function prepareWhenReachable(
  client: Pick<RunWorkflowClient, 'prepare'>,
  wait: { attempts: number; intervalMs: number },
  log: Pick<Logger, 'warn'>,
): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await client.prepare?.();
    } catch (err) {
      if (!(err instanceof TemporalUnreachableError) || attempt >= wait.attempts) throw err;
      log.warn({ attempt, attempts: wait.attempts, retryInMs: wait.intervalMs }, err.message);
      await new Promise((resolve) => setTimeout(resolve, wait.intervalMs));
    }
  }
}
