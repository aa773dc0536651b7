import { applyFreeActions, nextDue, plan, type Action, type Finished, type FreeAction, type Plan } from './interpreter.ts';
import { isInputKind, type Graph, type GraphNode, type JsonValue, type NodeResult } from './types.ts';
import { isTerminal, type RunPhase, type RunStatus } from '../run-status.ts';
import { isInMemoryStep, type BatchEntry, type StepBatch } from '../run-steps.ts';

/**
 * The run driver: what a run does next, decided once for both engines. Pure (no I/O, no Node built-ins,
 * no clock but the `now` it is given), so it is safe in Temporal's workflow sandbox. The engines keep
 * only their waiting and their I/O: they ask the driver for a move, perform it through the runs module
 * (src/runs/) and src/engine/execute-step.ts, and report back.
 *
 * Two levels:
 * - `nextRunMove(facts, now)`: from a run's status columns (small facts), what the run waits for or
 *   whether it is driven now (queued, prepare, park until a time, resume, wait for credentials, end).
 * - `RunDriver`: drives a running (or admitted, not yet started) run from its loaded state: records the
 *   free actions, batches in-memory steps (text.template, json.parse) with the free actions between
 *   them, executes I/O steps, suspends on a timer, finishes, or fails a graph that cannot progress.
 */

// ---------------------------------------------------------------------------------------------------
// The run as a whole

/** A run's status columns: all `nextRunMove` needs. */
export interface RunFacts {
  status: string | null;
  phase: RunPhase | null;
  suspendReason: 'wait_timer' | 'wait_signal' | null;
  /** Due time of a wait_timer suspension, epoch ms. */
  resumeAt: number | null;
}

export type RunMove =
  /** Terminal (or gone): nothing to do. */
  | { kind: 'end' }
  /** Queued: admission moves it on. */
  | { kind: 'await_admission' }
  /** Admitted and being prepared (funding): prepareRun, then look again. */
  | { kind: 'prepare' }
  /** A wait_timer suspension not due yet. */
  | { kind: 'park'; until: number }
  /** A due wait_timer suspension: resume it, then look again. */
  | { kind: 'resume_timer' }
  /** A wait_signal suspension: resume it once credentials are there. */
  | { kind: 'await_credentials' }
  /** Running, or admitted and not started (the driver starts it with its first write): drive it. */
  | { kind: 'advance' };

export function nextRunMove(run: RunFacts, now: number): RunMove {
  if (run.status === null || isTerminal(run.status)) return { kind: 'end' };
  if (run.status === 'pending') {
    if (run.phase === 'queued' || run.phase === 'scheduled') return { kind: 'await_admission' };
    return run.phase === 'starting' ? { kind: 'advance' } : { kind: 'prepare' };
  }
  if (run.status === 'suspended') {
    if (run.suspendReason === 'wait_timer' && run.resumeAt !== null) {
      return run.resumeAt > now ? { kind: 'park', until: run.resumeAt } : { kind: 'resume_timer' };
    }
    return { kind: 'await_credentials' };
  }
  return { kind: 'advance' };
}

// ---------------------------------------------------------------------------------------------------
// Driving a running run

/** Entries of in-memory work written at once, at most (bounds the statement and what a crash recomputes). */
export const MAX_BATCH = 64;

/** What the driver needs of a loaded run. */
export interface DriverInput {
  status: string;
  graph: Graph;
  inputs: Record<string, JsonValue>;
  progress: { results: Record<string, NodeResult>; timers: Record<string, number> };
}

/** A step's result as the engine reports it back. */
export type StepReport = { type: 'recorded'; result?: NodeResult } | { type: 'suspended' | 'not_runnable' };

/** How a step in flight ended, as an engine collects it: its report, or the error its I/O failed with. */
export type StepEnd<R> = { nodeId: string; report: R } | { nodeId: string; error: unknown };

export type DriverMove =
  /** Compute these in-memory steps now (no I/O) and report each with `computed`. */
  | { kind: 'compute'; steps: string[] }
  /** The run is finished: completeRun (with the batch, started in the same transaction when `start`), then `finished`. */
  | { kind: 'finish'; finished: Finished; actions: FreeAction[]; batch: StepBatch | undefined; start: boolean }
  /** The admitted run must be started before anything else is written: prepareRun, then `started`. */
  | { kind: 'start' }
  /** Write the in-memory work (recordBatch), then `batchRecorded`. */
  | { kind: 'record_batch'; batch: StepBatch }
  /** Record the free actions (applyActions), then `applied`. */
  | { kind: 'apply'; actions: FreeAction[] }
  /** Start these I/O steps (they are in flight from now on); report each with `stepDone`. */
  | { kind: 'execute'; steps: string[]; known: StepBatch['known'] }
  /** Only a timer is left: suspend the run (wait_timer), then `suspended`. */
  | { kind: 'suspend_timer'; until: number }
  /** Nothing can ever progress (only an invalid graph): fail the run. */
  | { kind: 'fail_stuck' }
  /** Wait for a step in flight to end (`stepDone`), or until `due` (epoch ms) when a timer runs alongside. */
  | { kind: 'wait'; due: number | null }
  | { kind: 'done' }
  /** Look at the database again (something changed under the driver). */
  | { kind: 'reload' }
  /** Suspended on a timer: wake at `until`. */
  | { kind: 'park'; until: number }
  /** A step failed with an infrastructure error and nothing is in flight any more. */
  | { kind: 'fail'; error: unknown };

type Pending = { p: Plan; free: FreeAction[]; executes: string[]; recorded: FreeAction[]; stage: 'start' | 'batch' | 'apply' | 'launch' };

/**
 * One pass over a loaded run. The driver keeps the run's state in memory between moves (the engine is
 * the only writer while it drives the run) and gives up (`reload`) after anything unexpected.
 *
 * In-memory steps are computed (by the engine, `compute`) while nothing is in flight, together with the
 * free actions between them, and written as one fenced batch before anything else is written, or inside
 * the completion transaction. An admitted run that is not started yet is started with its first write,
 * so a run computed entirely in memory is started and finished in one transaction.
 */
export class RunDriver {
  readonly results: Record<string, NodeResult>;
  readonly timers: Record<string, number>;
  /** Steps in flight (started by `execute`, not reported yet). */
  readonly inflight: Set<string>;
  readonly #graph: Graph;
  readonly #inputs: Record<string, JsonValue>;
  readonly #nodes: Map<string, GraphNode>;
  readonly #inputIds: Set<string>;
  #batch: BatchEntry[] = [];
  #unstarted: boolean;
  #blocked = false;
  #failure: unknown = null;
  #pending: Pending | null = null;
  /** Steps were just launched: wait before planning again. */
  #launched = false;
  #outcome: DriverMove | null = null;
  #finishing: { batched: boolean; unstarted: boolean; finished: Finished } | null = null;
  /** How the run ended when this driver completed it. */
  completion: Finished | null = null;
  #suspendUntil = 0;

  /** `running`: steps already in flight when the driver takes over (their results are not known yet). */
  constructor(s: DriverInput, running: readonly string[] = []) {
    this.#graph = s.graph;
    this.#inputs = s.inputs;
    this.results = { ...s.progress.results };
    this.timers = { ...s.progress.timers };
    this.inflight = new Set(running);
    this.#nodes = new Map(s.graph.nodes.map((n) => [n.id, n]));
    this.#inputIds = new Set(s.graph.nodes.filter((n) => isInputKind(n.kind)).map((n) => n.id));
    // Admitted but not started: preparation (funding, run.started) waits for the first write.
    this.#unstarted = s.status === 'pending';
  }

  node(nodeId: string): GraphNode | undefined {
    return this.#nodes.get(nodeId);
  }

  /**
   * The next move. `halted`: the engine stops (cancelled, lease lost, shutting down): nothing new is
   * planned, the steps in flight are waited for.
   */
  next(now: number, halted = false): DriverMove {
    for (;;) {
      if (this.#outcome) return this.#outcome;
      if (this.#pending) {
        const m = this.#continue(this.#pending);
        if (m) return m;
        continue;
      }
      if (!this.#blocked && !halted && !this.#launched) {
        const m = this.#plan(now);
        if (m) return m;
        if (this.#pending) continue;
        if (!this.#launched) continue; // state moved in memory: plan again at once
      }
      this.#launched = false;
      if (this.inflight.size === 0) return this.#failure ? { kind: 'fail', error: this.#failure } : { kind: 'reload' };
      return { kind: 'wait', due: this.#blocked || halted ? null : nextDue(this.timers) };
    }
  }

  /** Plans from the state in memory; returns a move, or null after queueing work (`#pending`, in memory). */
  #plan(now: number): DriverMove | null {
    const p = plan({ graph: this.#graph, inputs: this.#inputs, results: this.results, timers: this.timers, running: [...this.inflight], now });
    const free = p.actions.filter((a): a is FreeAction => a.type !== 'execute');
    const executes = p.actions.filter((a): a is Extract<Action, { type: 'execute' }> => a.type === 'execute').map((a) => a.nodeId);
    // Inputs resolve to the run's own inputs and emit no event: they are applied in memory only (the
    // activities read input values from the run's inputs), which saves a write per run.
    const recorded = free.filter((a) => !(a.type === 'resolve' && this.#inputIds.has(a.nodeId)));
    if (p.finished) {
      const batched = this.#batch.length > 0;
      this.#finishing = { batched, unstarted: this.#unstarted, finished: p.finished };
      return { kind: 'finish', finished: p.finished, actions: recorded, batch: batched ? this.#takeBatch() : undefined, start: this.#unstarted };
    }
    const inMemory =
      this.inflight.size === 0 &&
      this.#batch.length < MAX_BATCH &&
      (executes.length > 0
        ? executes.every((id) => isInMemoryStep(this.#nodes.get(id)))
        : free.length > 0 && (this.#batch.length > 0 || this.#unstarted || recorded.length === 0));
    if (inMemory) {
      if (recorded.length) this.#batch.push({ actions: recorded });
      applyFreeActions(this.results, this.timers, free);
      return executes.length ? { kind: 'compute', steps: executes } : null;
    }
    // Anything else writes: the run is started first, then the batch (its events precede what follows).
    this.#pending = { p, free, executes, recorded, stage: 'start' };
    return null;
  }

  #continue(w: Pending): DriverMove | null {
    switch (w.stage) {
      case 'start':
        w.stage = 'batch';
        return this.#unstarted ? { kind: 'start' } : null;
      case 'batch':
        w.stage = 'apply';
        return this.#batch.length > 0 ? { kind: 'record_batch', batch: this.#takeBatch() } : null;
      case 'apply':
        w.stage = 'launch';
        if (w.recorded.length) return { kind: 'apply', actions: w.recorded };
        applyFreeActions(this.results, this.timers, w.free);
        return null;
      case 'launch': {
        this.#pending = null;
        if (this.#blocked) return null;
        if (w.executes.length) {
          for (const id of w.executes) this.inflight.add(id);
          this.#launched = true;
          return { kind: 'execute', steps: w.executes, known: { results: { ...this.results }, inputs: this.#inputs } };
        }
        if (w.free.length) return null; // state moved: plan again at once
        this.#launched = true; // nothing new to plan: wait (or end) below
        if (this.inflight.size === 0) {
          if (w.p.waiting?.kind === 'timer') {
            this.#suspendUntil = w.p.waiting.until;
            return { kind: 'suspend_timer', until: w.p.waiting.until };
          }
          if (w.p.actions.length === 0) return { kind: 'fail_stuck' };
        }
        return null;
      }
    }
  }

  #takeBatch(): StepBatch {
    const entries = this.#batch;
    this.#batch = [];
    return { entries, known: { results: { ...this.results }, inputs: this.#inputs } };
  }

  // Reports from the engine --------------------------------------------------------------------------

  /** An in-memory step's result (from `compute`). */
  computed(nodeId: string, result: NodeResult, deltas: string[]): void {
    this.#batch.push({ step: nodeId, result, deltas });
    this.results[nodeId] = result;
  }

  /** prepareRun's status (from `start`). */
  started(status: string): void {
    if (status === 'running') this.#unstarted = false;
    else this.#outcome = status === null || isTerminal(status) ? { kind: 'done' } : { kind: 'reload' };
  }

  /** recordBatch's answer: false means the batch was refused and recorded entry by entry: look again. */
  batchRecorded(recorded: boolean): void {
    if (!recorded) this.#outcome = { kind: 'reload' };
  }

  /** applyActions' answer (from `apply`). */
  applied(ok: boolean): void {
    if (ok) applyFreeActions(this.results, this.timers, this.#pending!.free);
    else this.#blocked = true;
  }

  /** completeRun's answer (from `finish`). */
  finished(completed: boolean): void {
    const f = this.#finishing!;
    if (completed) this.completion = f.finished;
    // Not completed after a batch or an attempted start: the run needs a fresh look; else it was already terminal.
    this.#outcome = completed || !(f.batched || f.unstarted) ? { kind: 'done' } : { kind: 'reload' };
  }

  /** suspendRun's answer (from `suspend_timer`). */
  suspended(changed: boolean): void {
    this.#outcome = changed ? { kind: 'park', until: this.#suspendUntil } : { kind: 'reload' };
  }

  /** A step in flight ended: its outcome, or the error it failed with (null: ignored, e.g. aborted). */
  stepDone(nodeId: string, report: StepReport | { error: unknown }): void {
    this.inflight.delete(nodeId);
    if ('error' in report) {
      this.#blocked = true;
      if (report.error !== null) this.#failure ??= report.error;
    } else if (report.type === 'recorded') {
      if (report.result) this.results[nodeId] = report.result;
    } else {
      this.#blocked = true; // suspended for credentials, or the run ended / is no longer running
    }
  }
}

/** What the engine does after `advanceRun`: small facts only (they go into the workflow history). */
export type AdvanceResult =
  /** The run is terminal: its status, a completed run's outcome and a failed run's buyer-safe reason. */
  | { kind: 'ended'; status: RunStatus | null; outcome: string | null; reason?: string | null }
  /** Queued: wait for admission. */
  | { kind: 'queued' }
  /** Running: start the I/O steps `start` (the others given as running still are), then wait for any step or until `due`. */
  | { kind: 'wait'; start: string[]; due: number | null }
  /** Suspended on a timer until `until`. */
  | { kind: 'park'; until: number }
  /** Suspended until credentials are supplied. */
  | { kind: 'await_credentials' }
  /** Nothing settled yet (the run kept changing under the driver): call again. */
  | { kind: 'again' };
