import { runStarted } from '../observability/metrics.ts';
import { traceComputedStep } from '../observability/trace-spans.ts';
import { nextRunMove, RunDriver, type AdvanceResult, type DriverMove, type RunMove } from '../domain/graph/run-driver.ts';
import { computeTimedSyncStep } from '../runs/record-step.ts';
import { completeRun } from '../runs/complete-run.ts';
import { credentialsAvailable, lacksProviderKey } from '../runs/credentials.ts';
import { fork, type RunsDeps } from '../runs/deps.ts';
import { executeStep } from './execute-step.ts';
import { applyActions } from '../runs/free-actions.ts';
import { prepareRun } from '../runs/prepare-run.ts';
import { recordBatch } from '../runs/record-batch.ts';
import { STUCK_GRAPH_REASON } from '../domain/run-status.ts';
import { loadRunState, type RunState } from '../runs/run-state.ts';
import { failRun, resumeRun, suspendRun } from '../runs/transitions.ts';

/**
 * The run driver's writes (src/domain/graph/run-driver.ts decides, the runs module, src/runs/, writes), shared by both
 * engines, and `advanceRun`: one pass of the driver over a run loaded from the database, up to the
 * point where the engine must wait. The Temporal workflow runs the I/O steps and all waiting itself and
 * calls `advanceRun` as one activity for everything else (free actions, in-memory steps, start,
 * completion), so node values and outputs never travel through the workflow history.
 */

/**
 * Performs a driver move that is a write or an in-memory computation and reports it back to the driver.
 * Returns 'handled', 'ended' (the run was failed as stuck) or null (not such a move: the engine's own).
 */
export async function performMove(deps: RunsDeps, s: RunState, drv: RunDriver, m: DriverMove): Promise<'handled' | 'ended' | null> {
  const id = s.runId;
  switch (m.kind) {
    case 'compute':
      for (const nodeId of m.steps) {
        const node = drv.node(nodeId)!;
        const { result, deltas } = traceComputedStep(id, node, () => computeTimedSyncStep(s.graph, node, drv.results, s.inputs));
        drv.computed(nodeId, result, deltas);
      }
      return 'handled';
    case 'finish': {
      const r = await completeRun(deps, id, m.finished, m.actions, m.batch, { start: m.start });
      if (r.completed && m.start) runStarted();
      // Not started here (e.g. insufficient funds): preparation decides, then the driver looks again.
      if (!r.completed && m.start) await prepare(deps, id);
      drv.finished(r.completed);
      return 'handled';
    }
    case 'start':
      drv.started((await prepare(deps, id)).status);
      return 'handled';
    case 'record_batch':
      drv.batchRecorded((await recordBatch(deps, id, m.batch)).recorded);
      return 'handled';
    case 'apply':
      drv.applied((await applyActions(deps, id, m.actions)).applied);
      return 'handled';
    case 'suspend_timer':
      drv.suspended((await suspendRun(deps, id, { reason: 'wait_timer', resumeAt: m.until })).changed);
      return 'handled';
    case 'fail_stuck':
      await failRun(deps, id, STUCK_GRAPH_REASON);
      return 'ended';
    default:
      return null;
  }
}

/** prepareRun, counting the runs it started. */
async function prepare(deps: RunsDeps, runId: string): ReturnType<typeof prepareRun> {
  const p = await prepareRun(deps, runId);
  if (p.started) runStarted();
  return p;
}

/**
 * Performs the writes a run's status asks for before it can be driven (both engines): preparation of an
 * admitted run, the resume of a due timer, and the resume of a wait_signal suspension whose credentials
 * arrived meanwhile (`resumeCredentials`: the engine has no step of the run still in flight). True when
 * it wrote, so the run must be loaded again; false leaves the move to the engine.
 */
export async function performStatusMove(deps: RunsDeps, s: RunState, move: RunMove, opts: { resumeCredentials: boolean }): Promise<boolean> {
  switch (move.kind) {
    case 'prepare':
      await prepare(deps, s.runId);
      return true;
    case 'resume_timer':
      await resumeRun(deps, s.runId, { reason: 'wait_timer' });
      return true;
    case 'await_credentials':
      if (!opts.resumeCredentials || s.suspendReason !== 'wait_signal' || !(await credentialsAvailable(deps, s.runId))) return false;
      await resumeRun(deps, s.runId, { reason: 'wait_signal' });
      return true;
    default:
      return false;
  }
}

/** Reloads within one call at most this often before handing back (`again`). */
const MAX_PASSES = 8;

/**
 * Moves a run on as far as it goes without waiting: prepares an admitted run, resumes a due timer or a
 * run whose credentials arrived, records free actions and in-memory steps, completes the run. `running`:
 * the step nodes the caller has in flight (planned as running, so never started twice).
 */
export async function advanceRun(deps: RunsDeps, runId: string, running: readonly string[] = []): Promise<AdvanceResult> {
  for (let pass = 0; pass < MAX_PASSES; pass++) {
    const s = await loadRunState(deps, runId);
    if (!s) return { kind: 'ended', status: null, outcome: null };
    const move = nextRunMove(s, Date.now());
    if (await performStatusMove(deps, s, move, { resumeCredentials: running.length === 0 })) continue;
    switch (move.kind) {
      case 'end':
        return { kind: 'ended', status: s.status, outcome: s.outcome ?? null, reason: s.reason ?? null };
      case 'await_admission':
        return { kind: 'queued' };
      case 'park':
        return { kind: 'park', until: move.until };
      case 'await_credentials':
        return { kind: 'await_credentials' };
      case 'advance': {
        const r = await advanceLoaded(deps, s, running);
        if (r) return r;
      }
    }
  }
  return { kind: 'again' };
}

/** Every step is an llm.chat of a BYOK run with no key for its provider (it would suspend the run at once). */
async function waitForKeys(deps: RunsDeps, s: RunState, nodeIds: string[]): Promise<boolean> {
  if (s.credentialMode !== 'byok') return false;
  const em = fork(deps);
  for (const nodeId of nodeIds) {
    const node = s.graph.nodes.find((n) => n.id === nodeId);
    if (node?.kind !== 'llm.chat' || !(await lacksProviderKey(em, s.runId, s.accountId, node.provider))) return false;
  }
  return nodeIds.length > 0;
}

/** One driver pass over a loaded run; null when the run must be looked at again. */
async function advanceLoaded(deps: RunsDeps, s: RunState, running: readonly string[]): Promise<AdvanceResult | null> {
  const drv = new RunDriver(s, running);
  const start: string[] = [];
  for (;;) {
    const m = drv.next(Date.now());
    const done = await performMove(deps, s, drv, m);
    if (done === 'ended') return null; // the next look reports the run's terminal status
    if (done === 'handled') continue;
    switch (m.kind) {
      case 'execute':
        if (start.length === 0 && running.length === 0 && (await waitForKeys(deps, s, m.steps))) {
          // Each step would only suspend the run for a key (no I/O): done here, not by an activity each.
          for (const nodeId of m.steps) await executeStep(deps, { runId: s.runId, nodeId });
          return null; // the next look reports the wait for credentials
        }
        start.push(...m.steps);
        continue;
      case 'wait':
        return { kind: 'wait', start, due: m.due };
      case 'park':
        return { kind: 'park', until: m.until };
      case 'done':
        // Completed by this call: how it ended is known; otherwise the next look tells.
        return drv.completion ? { kind: 'ended', status: drv.completion.status, outcome: drv.completion.outcome, reason: drv.completion.reason } : null;
      case 'reload':
        // Steps this pass planned must still run: hand them over with the wait for them.
        return start.length ? { kind: 'wait', start, due: null } : null;
      case 'fail':
        throw m.error;
      default:
        return null;
    }
  }
}
