import type { Em } from '../db/orm.ts';
import { query } from '../db/statement.ts';
import { FENCED_WRITE, FENCED_WRITE_STATE } from '../sql/fenced-write.ts';
import type { NodeResult } from '../domain/graph/types.ts';
import type { Usd } from '../domain/money.ts';
import type { NewRunEvent } from '../domain/run-steps.ts';
import type { RunsDeps } from './deps.ts';
import { announceFinished, type FinishedRun } from './finish-run.ts';
import { writtenBy, type Written } from './written.ts';
import { RUN_STATUSES, type RunPhase, type RunStatus } from '../domain/run-status.ts';

/**
 * Every run operation writes through here: one fenced update of the run row, fenced in SQL on the run's
 * status (and, for node results, on the node having no result yet), so a retry, a late step or a second
 * process never records a result, an event or a charge twice, and nothing changes a terminal run. Event
 * sequences are allocated by bumping `runs.last_sequence` in the same statement that inserts the events
 * (a data-modifying CTE), so they stay gap-free per run. Bus notifications are published only after
 * commit, with the events written (Written): live readers of this process deliver them without reading
 * the log back.
 */

export interface FencedWrite {
  /** The run must currently have one of these statuses. */
  statuses: readonly RunStatus[];
  /** These nodes must not have a result yet. */
  absentResults?: string[];
  /** These delay nodes must not have a started timer. */
  absentTimers?: string[];
  /** compute_usd + n × step_usd must stay within compute_limit_usd (the n-th step may start). */
  computeLimitSteps?: number;
  /** The run must be in one of these phases. */
  phases?: readonly RunPhase[];
  /** The run must be suspended for this reason. */
  suspendedFor?: 'wait_timer' | 'wait_signal';
  /** No credential may have been supplied to the run for this provider. */
  noCredentialFor?: string;
  /** The status move written with the events (see FENCED_WRITE); `resumeAt` in epoch ms. */
  move?: { to: 'prepare' } | { to: 'start' } | { to: 'suspend'; reason: 'wait_timer' | 'wait_signal'; resumeAt: number | null } | { to: 'resume' };
  /** Results merged into `progress`, timers added and removed. */
  progress?: ProgressChange;
  /** Completed steps charged: each one step_usd, plus `extra` (LLM usage). */
  compute?: { steps: number; extra?: Usd };
  events: NewRunEvent[];
}

export interface ProgressChange {
  results?: Record<string, NodeResult>;
  /** Started delay timers: nodeId → due time (epoch ms). */
  addTimers?: Record<string, number>;
  removeTimers?: string[];
}

/**
 * One fenced update of the run row that allocates the events' sequences (bumping last_sequence) and
 * inserts the events, as a single statement (FENCED_WRITE, a data-modifying CTE): atomic without a
 * transaction, and one round trip. Returns what it wrote, or null when the fence did not hold (nothing
 * written).
 */
export async function fencedWrite(em: Em, runId: string, w: FencedWrite): Promise<Written | null> {
  const [row] = await query(em, FENCED_WRITE, fencedCall(runId, w));
  return row ? writtenBy(row, w.events) : null;
}

/** fencedWrite returning the run's state columns (new values) with what it wrote, or null. */
export async function fencedWriteState(em: Em, runId: string, w: FencedWrite): Promise<{ row: Record<string, unknown>; written: Written } | null> {
  const [row] = await query(em, FENCED_WRITE_STATE, fencedCall(runId, w));
  return row ? { row, written: writtenBy(row, w.events) } : null;
}

/** FENCED_WRITE's one parameter: the call as named fields (src/sql/fenced-write.ts documents them). */
function fencedCall(runId: string, w: FencedWrite): unknown[] {
  const move = w.move;
  const call = {
    run_id: runId,
    statuses: w.statuses,
    absent_results: w.absentResults ?? [],
    absent_timers: w.absentTimers ?? [],
    limit_steps: w.computeLimitSteps ?? null,
    phases: w.phases ?? null,
    suspended_for: w.suspendedFor ?? null,
    no_credential_for: w.noCredentialFor ?? null,
    move: move?.to ?? null,
    suspend_as: move?.to === 'suspend' ? move.reason : null,
    resume_ms: move?.to === 'suspend' ? move.resumeAt : null,
    results: w.progress ? (w.progress.results ?? {}) : null,
    add_timers: w.progress?.addTimers ?? {},
    remove_timers: w.progress?.removeTimers ?? [],
    steps: w.compute?.steps ?? 0,
    extra: w.compute?.extra?.toFixed() ?? '0',
    types: w.events.map((e) => e.type),
    node_ids: w.events.map((e) => e.nodeId ?? null),
    data: w.events.map((e) => e.data ?? {}),
  };
  return [JSON.stringify(call)];
}

/** After the commit of `written`: live readers told, with its events. */
export function publish(deps: RunsDeps, runId: string, written: Written | null | undefined): void {
  if (written && written.last > 0) deps.bus.publish(runId, written.last, written.events);
}

/** After a committed terminal transition: counted and logged, live readers and (when outbox rows were written) the webhook dispatcher told. */
export function publishTerminal(deps: RunsDeps, runId: string, finished: FinishedRun | null | undefined): void {
  if (finished) announceFinished(deps, runId, finished);
}

/** The result into progress and, for a completed step, one step_usd plus `extra` (LLM usage) into compute. */
export function recordResult(nodeId: string, result: NodeResult, compute: 'step' | { extra: Usd } | null): Pick<FencedWrite, 'progress' | 'compute'> {
  const progress = { results: { [nodeId]: result } };
  if (compute === 'step') return { progress, compute: { steps: 1 } };
  if (compute) return { progress, compute: { steps: 1, extra: compute.extra } };
  return { progress };
}

/**
 * Appends events to a run's log whatever its status (tests, benchmarks, tools), through the same
 * statement as every other run write. Returns what it wrote; throws when the run does not exist.
 */
export async function appendRunEvents(em: Em, runId: string, events: NewRunEvent[]): Promise<Written> {
  const written = await fencedWrite(em, runId, { statuses: RUN_STATUSES, events });
  if (written === null) throw new Error(`run ${runId} does not exist`);
  return written;
}
