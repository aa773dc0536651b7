import type { Em } from '../db/orm.ts';
import { query, type StatementEm } from '../db/statement.ts';
import type { RunOutputField } from '../domain/graph/types.ts';
import { FINISH_RUNS, finishRunsValues, type RunEnding } from '../sql/finish-runs.ts';
import { runFinished } from '../observability/metrics.ts';
import type { RunsDeps } from './deps.ts';
import type { PublicRunEvent } from './run-views.ts';
import { together, writtenBy, type Written } from './written.ts';

/**
 * The one way a run becomes terminal: FINISH_RUNS (src/sql/finish-runs.ts), for the engines, cancellation,
 * the queue and credentials timeouts, a run refused funding and runs computed in memory. Under the run's
 * row lock it refuses a run already terminal (a late step or a late cancel never changes a finished run),
 * writes the terminal state and event, deletes the run's secrets, writes the webhook outbox rows, and
 * settles the money exactly once. The rows every run of an account or workflow contends for (the wallet,
 * the workflow's run counter) are locked after the run's own, and held only until the commit that follows.
 */

export interface Finish {
  status: 'completed' | 'failed' | 'cancelled';
  outcome?: 'completed' | 'completed_with_issues' | null;
  reason?: string | null;
  outputs?: RunOutputField[];
  /**
   * What the ending charges, as `wr_run_charge` takes it (src/db/entities/routines.ts, docs/design/money.md):
   * `none` (cancelled, queue timeout, insufficient funds), `compute` (compute of completed steps:
   * completed_with_issues, node failures, compute limit), `full` (creator price if charged to this caller + compute).
   */
  charge: 'none' | 'compute' | 'full';
}

export interface FinishedRun {
  last: number;
  /** The events its transaction wrote up to `last`, in order, when the writer has them all (live readers take them as they are). */
  events?: PublicRunEvent[];
  webhooks: number;
  status: Finish['status'];
  outcome: string | null;
  accountId: string;
}

/**
 * `finished` with the events its transaction wrote before it (`before`, null: none): one transaction
 * under the run's row lock, so those and the terminal event follow each other, and live readers take them
 * all as they are.
 */
export function finishedAfter(before: Written | null, finished: FinishedRun): FinishedRun {
  return { ...finished, events: together(before, { last: finished.last, events: finished.events ?? [] })!.events };
}

/**
 * After the commit of a terminal transition (engines and cancellation): counted, logged with the run's
 * ids, and live readers and the webhook dispatcher (when outbox rows were written) told.
 */
export function announceFinished(deps: Pick<RunsDeps, 'bus' | 'log' | 'webhooks'>, runId: string, f: FinishedRun): void {
  runFinished(f.status, f.outcome);
  deps.log.info({ runId, accountId: f.accountId, status: f.status, outcome: f.outcome }, 'run finished');
  deps.bus.publish(runId, f.last, f.events);
  if (f.webhooks > 0) deps.webhooks?.notify();
}

/** A run's ending as FINISH_RUNS takes it: no fences but the run's status, no writes but the ending, unless `more` says so. */
export function runEnding(runId: string, fin: Finish, more: Partial<RunEnding> = {}): RunEnding {
  return {
    runId,
    admitted: false,
    fundNow: false,
    absentResults: [],
    absentTimers: [],
    limitSteps: null,
    results: null,
    addTimers: {},
    removeTimers: [],
    steps: 0,
    extra: '0',
    status: fin.status,
    outcome: outcomeOf(fin),
    reason: fin.status === 'failed' ? (fin.reason ?? 'the run failed') : null,
    outputs: fin.outputs ?? null,
    charged: fin.charge,
    events: [{ type: `run.${fin.status}`, data: terminalEventData(fin) }],
    channel: null,
    ...more,
  };
}

/** The outcome a finished run records: a completed run's (completed unless said otherwise), else none. */
const outcomeOf = (fin: Finish): string | null => (fin.status === 'completed' ? (fin.outcome ?? 'completed') : null);

/** FINISH_RUNS's row of a run it wrote, as what a terminal transition wrote. */
export function finishedBy(row: Record<string, unknown>, ending: RunEnding): FinishedRun {
  return {
    ...writtenBy(row, ending.events),
    webhooks: Number(row.webhooks),
    status: ending.status,
    outcome: ending.outcome,
    accountId: String(row.account_id),
  };
}

/** Ends runs in `em`'s transaction (or one of its own), ONE statement for all of them: each one FINISH_RUNS wrote, by run id. */
export async function finishRuns(em: StatementEm, endings: readonly RunEnding[]): Promise<Map<string, FinishedRun>> {
  const finished = new Map<string, FinishedRun>();
  if (endings.length === 0) return finished;
  for (const row of await query(em, FINISH_RUNS, finishRunsValues(endings))) {
    const ending = endings[Number(row.ord) - 1];
    if (row.written === true) finished.set(ending.runId, finishedBy(row, ending));
  }
  return finished;
}

/** finishRuns of one run, with its terminal event: what it wrote, or null when the run was terminal already. */
export async function finishRun(tx: Em, runId: string, fin: Finish): Promise<FinishedRun | null> {
  return (await finishRuns(tx, [runEnding(runId, fin)])).get(runId) ?? null;
}

/** The terminal event's data. */
export function terminalEventData(fin: Finish): Record<string, string> {
  const data: Record<string, string> = { status: fin.status };
  if (fin.status === 'failed') data.reason = fin.reason ?? 'the run failed';
  return data;
}
