import { fork, type RunsDeps } from './deps.ts';
import { publishTerminal } from './fenced-write.ts';
import { finishRun } from './finish-run.ts';

/**
 * Commits a run's cancellation (not charged, hold released, terminal event, webhooks) and tells live
 * readers. False when the run was already terminal or does not exist. Called by the cancel service
 * (REST, GraphQL) and by the Temporal worker when the workflow itself was cancelled (UI, CLI).
 */
export async function commitCancellation(deps: RunsDeps, runId: string): Promise<{ cancelled: boolean }> {
  const finished = await fork(deps).transactional((tx) => finishRun(tx, runId, { status: 'cancelled', charge: 'none' }));
  publishTerminal(deps, runId, finished);
  return { cancelled: finished !== null };
}
