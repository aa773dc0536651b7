import type { Em } from '../db/orm.ts';
import { query } from '../db/statement.ts';
import type { RunOutputField } from '../domain/graph/types.ts';
import { settleRun, type SettleInput } from '../billing/settle-run.ts';
import { enqueueRunWebhooks } from './enqueue-run-webhooks.ts';
import { isTerminal } from '../domain/run-status.ts';
import { FINISH_RUN, LOCK_RUN_TO_FINISH } from '../sql/runs.ts';
import { runFinished } from '../observability/metrics.ts';
import type { RunsDeps } from './deps.ts';
import type { PublicRunEvent } from './run-views.ts';
import { together, writtenBy, type Written } from './written.ts';

/**
 * The one way a run becomes terminal, used by the engines and by cancellation. Inside the caller's
 * transaction it locks the run, refuses if it is already terminal (a late step or a late cancel never
 * changes a finished run), writes the terminal state and event, deletes the run's secrets, writes the
 * webhook outbox rows, and settles money exactly once. Returns the new last sequence and how many webhook
 * deliveries it queued (the dispatcher is woken only for those), or null when it changed nothing.
 *
 * Statement order matters for throughput: the per-run writes come first, and the rows every run of an
 * account or workflow contends for (the wallet, the workflow's run counter) are touched last, so their
 * locks are held only until the commit that follows.
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

/** What finishing reads of the run, under its row lock. */
interface LockedRun {
  accountId: string;
  status: string;
  funding: string | null;
  bundleId: string | null;
  holdUsd: string;
  workflowId: string;
}

async function lockRun(tx: Em, runId: string): Promise<LockedRun | null> {
  const [row] = await query(tx, LOCK_RUN_TO_FINISH, [runId]);
  if (!row) return null;
  const text = (v: unknown) => (v === null || v === undefined ? null : String(v));
  return {
    accountId: String(row.account_id),
    status: String(row.status),
    funding: text(row.funding),
    bundleId: text(row.bundle_id),
    holdUsd: String(row.hold_usd),
    workflowId: String(row.workflow_id),
  };
}

/** The terminal columns FINISH_RUN and FINISH_RUNS_IN_MEMORY write, in their parameter order: status, outcome, reason, outputs (JSON or null: kept). */
export function terminalColumns(fin: Finish): [string, string | null, string | null, string | null] {
  return [
    fin.status,
    fin.status === 'completed' ? (fin.outcome ?? 'completed') : null,
    fin.status === 'failed' ? (fin.reason ?? 'the run failed') : null,
    fin.outputs ? JSON.stringify(fin.outputs) : null,
  ];
}

export async function finishRun(tx: Em, runId: string, fin: Finish): Promise<FinishedRun | null> {
  const row = await lockRun(tx, runId);
  if (!row || isTerminal(row.status)) return null;

  const settle: SettleInput = { id: runId, accountId: row.accountId, funding: row.funding, bundleId: row.bundleId, holdUsd: row.holdUsd };
  const type = `run.${fin.status}`;
  const data = terminalEventData(fin);

  // The terminal state, its charge (computed by the statement), its event and the deletion of the run's secrets in one statement.
  const [updated] = await query(tx, FINISH_RUN, [runId, ...terminalColumns(fin), fin.charge, [type], [null], [JSON.stringify(data)]]);
  const finished = await settleFinished(tx, runId, fin, updated, settle, row.workflowId);
  return { ...finished, events: writtenBy(updated, [{ type, data }]).events };
}

/**
 * The rest of a terminal transition once the run's row is terminal (`updated`: FINISH_RUN's row, with
 * `charge_usd` what it is billed, null when not charged): the webhook outbox, then the settlement and
 * the workflow's run counter (hot rows) in one statement, last before the commit.
 */
async function settleFinished(
  tx: Em,
  runId: string,
  fin: Finish,
  updated: Record<string, unknown>,
  settle: SettleInput,
  workflowId: string,
): Promise<FinishedRun> {
  const webhooks = await enqueueRunWebhooks(tx, settle.accountId, runId, `run.${fin.status}`);
  await settleRun(tx, settle, updated.charge_usd === null ? null : String(updated.charge_usd), {
    countCompletedRunOf: fin.status === 'completed' ? workflowId : undefined,
  });
  const outcome = fin.status === 'completed' ? (fin.outcome ?? 'completed') : null;
  return { last: Number(updated.last_sequence), webhooks, status: fin.status, outcome, accountId: settle.accountId };
}

/** The terminal event's data (finishRun, and FINISH_RUNS_IN_MEMORY through src/runs/start-and-complete.ts). */
export function terminalEventData(fin: Finish): Record<string, string> {
  const data: Record<string, string> = { status: fin.status };
  if (fin.status === 'failed') data.reason = fin.reason ?? 'the run failed';
  return data;
}
