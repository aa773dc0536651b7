import { query } from '../../db/statement.ts';
import { fork, type RunsDeps } from '../../runs/deps.ts';
import { publishTerminal } from '../../runs/fenced-write.ts';
import { finishRun } from '../../runs/finish-run.ts';
import { OPEN_TEMPORAL_RUNS } from '../../sql/temporal-runs.ts';
import type { ClosedByTemporal, RunWorkflowClient } from './client.ts';

/**
 * Runs whose workflow was closed by Temporal rather than by the workflow (an operator's Terminate in
 * the UI or CLI, a workflow execution timeout) would otherwise stay in flight for ever: suspended or
 * running, billing pending, holding a RUN_CAPACITY slot. Every process running the Temporal engine
 * looks, every few seconds, for such executions closed since its last look (a visibility query on
 * ExecutionStatus and CloseTime, on its task queue), keeps the runs still open in Postgres whose latest
 * execution is the closed one (a reset's new execution carries the run on), and fails them through the
 * runs module, like any failed run: charged the compute of the steps that ran, never the price, hold
 * released, terminal event, webhooks. Finishing is idempotent under the run's row lock, so processes
 * that find the same run at once finish it once. docs/operations.md ("Temporal-side actions").
 */

export const CLOSED_BY_TEMPORAL_REASONS: Record<ClosedByTemporal, string> = {
  terminated: 'the run was stopped by an operator: its Temporal workflow was terminated',
  timed_out: 'the run timed out: its Temporal workflow execution reached its time limit',
};

/** On a process's first look: how far back closed executions are searched. */
const FIRST_LOOK_BACK_MS = 7 * 24 * 3600_000;
/** Each look overlaps the previous one by this much: visibility is updated a little after a close. */
const OVERLAP_MS = 5 * 60_000;

export class ClosedWorkflowReconciler {
  readonly #deps: RunsDeps;
  readonly #client: RunWorkflowClient;
  #lastLookAt: number | null = null;

  constructor(deps: RunsDeps, client: RunWorkflowClient) {
    this.#deps = deps;
    this.#client = client;
  }

  /** One look: the ids of the runs it failed. */
  async reconcile(): Promise<string[]> {
    const client = this.#client;
    if (!client.listClosedByTemporal || !client.closedByTemporal) return [];
    const startedAt = Date.now();
    const since = new Date(this.#lastLookAt === null ? startedAt - FIRST_LOOK_BACK_MS : this.#lastLookAt - OVERLAP_MS);
    const closed = await client.listClosedByTemporal(since);
    this.#lastLookAt = startedAt;
    if (closed.length === 0) return [];
    const open = await query<{ id: string }>(fork(this.#deps), OPEN_TEMPORAL_RUNS, [closed]);
    const failed: string[] = [];
    for (const { id } of open) {
      const runId = String(id);
      const how = await client.closedByTemporal(runId);
      if (!how) continue;
      const reason = CLOSED_BY_TEMPORAL_REASONS[how];
      const finished = await fork(this.#deps).transactional((tx) => finishRun(tx, runId, { status: 'failed', charge: 'compute', reason }));
      publishTerminal(this.#deps, runId, finished);
      if (!finished) continue;
      failed.push(runId);
      this.#deps.log.warn({ runId, accountId: finished.accountId, closedBy: how }, 'run failed: Temporal closed its workflow');
    }
    return failed;
  }
}
