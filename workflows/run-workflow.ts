import {
  ActivityCancellationType,
  ActivityFailure,
  CancellationScope,
  condition,
  continueAsNew,
  isCancellation,
  proxyActivities,
  setHandler,
  sleep,
  workflowInfo,
} from '@temporalio/workflow';
// The interpreter is pure (no I/O, no clock, no randomness): safe in the workflow sandbox, and the
// very code the embedded engine runs.
import { applyFreeActions, nextDue, plan, type Action } from '../src/domain/graph/interpreter.ts';
import { isInputKind, type NodeResult } from '../src/domain/graph/types.ts';
// Types only: the activity implementations (database, providers) never enter the workflow bundle.
import type * as activities from '../src/engine/temporal/activities.ts';
import type { FreeAction, RunState, StepOutcome } from '../src/engine/run-activities.ts';
import {
  admittedSignal,
  cancelSignal,
  credentialsSuppliedSignal,
  stateQuery,
  type RunWorkflowArgs,
  type RunWorkflowResult,
  type RunWorkflowView,
} from './definitions.ts';

/**
 * One run = one workflow execution (workflow id = run id). The workflow drives the run exactly like the
 * embedded engine (src/engine/embedded/embedded-engine.ts): the same pure `plan()` decides, the same
 * activities write (every database write is an activity, fenced in SQL and idempotent).
 *
 *  1. Admission: waits for the `admitted` signal (sent by the admission loop after admitQueuedRuns
 *     moved the run out of the queue, DB-safe across processes). Every ADMISSION_RECHECK it looks at
 *     the run itself, so a lost signal or a queue timeout (the run failed in the queue) is noticed.
 *  2. prepareRun (funding, run.started) → loop { plan(state, Date.now()) → applyActions (one activity
 *     for the free actions) → executeStep activities for ready steps, concurrently (parallel branches)
 *     → wait for a step or the next timer } → completeRun.
 *  3. A delay with nothing else to do: suspendRun (wait_timer), a durable `sleep` until the due time,
 *     resumeRun. A BYOK step without credentials suspends the run (wait_signal): the workflow waits on
 *     `condition()` for the `credentialsSupplied` signal, then resumeRun.
 *  4. The `cancel` signal (the cancel-run service has already committed `cancelled`) cancels the scope
 *     everything runs in: running step activities are cancelled (their AbortSignal fires through the
 *     heartbeat), timers and waits stop, and the workflow returns. A Temporal cancellation (UI, CLI)
 *     does the same and first commits the cancellation through the cancelRun activity.
 *
 * State lives in Postgres; the workflow keeps only what it can reload (`loadRunState`), so after
 * anything unexpected it reloads, and it continues-as-new when Temporal suggests it.
 */

type Activities = activities.RunActivities;

/** Database activities: short, idempotent and fenced, so retried until they succeed. */
const db = proxyActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds' },
});

/**
 * Step activities: an LLM stream or an HTTP call may take minutes, so a long start-to-close with a
 * heartbeat timeout (the activity heartbeats on every delta batch and on a timer). A failed LLM or HTTP
 * call is already a node result (node.failed), not an error; an error here is infrastructure (database,
 * worker crash), so a few attempts only: a retry re-runs the provider call, which costs money. The
 * re-executed step continues the node's log instead of repeating it.
 */
const steps = proxyActivities<Activities>({
  startToCloseTimeout: '15 minutes',
  heartbeatTimeout: '30 seconds',
  retry: { initialInterval: '2 seconds', backoffCoefficient: 2, maximumInterval: '30 seconds', maximumAttempts: 3 },
  cancellationType: ActivityCancellationType.TRY_CANCEL,
});

/** How often a queued run looks at itself (lost `admitted` signal, queue timeout). */
export const ADMISSION_RECHECK_MS = 60_000;
/** How often a run waiting for credentials looks at itself (lost signal, resumed elsewhere). */
export const SIGNAL_RECHECK_MS = 5 * 60_000;
/** Pause after a step activity failed all its attempts, doubling up to RETRY_MAX_MS. */
const RETRY_BASE_MS = 5_000;
const RETRY_MAX_MS = 60_000;

const TERMINAL = ['completed', 'failed', 'cancelled'];
const isTerminal = (status: string | null | undefined) => status === null || status === undefined || TERMINAL.includes(status);

type StepDone = { nodeId: string; outcome: StepOutcome } | { nodeId: string; error: unknown };
type Advance = { kind: 'done'; status: string } | { kind: 'reload' } | { kind: 'park'; until: number };

export async function runWorkflow(args: RunWorkflowArgs): Promise<RunWorkflowResult> {
  const runId = args.runId;
  let admitted = args.admitted === true;
  let cancelRequested = false;
  let credentialsSignals = 0;
  let credentialsConsumed = 0;
  const view: RunWorkflowView = { runId, phase: 'queued', runningSteps: [], until: null, cancelRequested: false };

  const scope = new CancellationScope();
  setHandler(admittedSignal, () => {
    admitted = true;
  });
  setHandler(credentialsSuppliedSignal, () => {
    credentialsSignals++;
  });
  setHandler(cancelSignal, () => {
    cancelRequested = true;
    view.cancelRequested = true;
    scope.cancel();
  });
  setHandler(stateQuery, () => ({ ...view, runningSteps: [...view.runningSteps] }));

  /** Waits for the `admitted` signal; returns the final status when the run ended while queued (queue timeout, cancel). */
  async function awaitAdmission(): Promise<{ ended: string | null } | null> {
    view.phase = 'queued';
    while (!admitted) {
      if (await condition(() => admitted, ADMISSION_RECHECK_MS)) break;
      const s = await db.runStatus(runId);
      if (!s || isTerminal(s.status)) return { ended: s?.status ?? null };
      if (s.status !== 'pending' || s.phase !== 'queued') admitted = true;
    }
    return null;
  }

  /** Drives a running run from its loaded state until it ends, parks on a timer or needs a reload. */
  async function advance(s: RunState): Promise<Advance> {
    view.phase = 'running';
    const results: Record<string, NodeResult> = { ...s.progress.results };
    const timers: Record<string, number> = { ...s.progress.timers };
    const inputIds = new Set(s.graph.nodes.filter((n) => isInputKind(n.kind)).map((n) => n.id));
    const silent = (a: FreeAction) => a.type === 'resolve' && inputIds.has(a.nodeId);
    const inflight = new Set<string>();
    const done: StepDone[] = [];
    let blocked = false;
    let failure: unknown = null;

    for (;;) {
      if (!blocked) {
        const p = plan({ graph: s.graph, inputs: s.inputs, results, timers, running: [...inflight], now: Date.now() });
        const free = p.actions.filter((a): a is FreeAction => a.type !== 'execute');
        const executes = p.actions.filter((a): a is Extract<Action, { type: 'execute' }> => a.type === 'execute');
        const recorded = free.filter((a) => !silent(a));
        if (p.finished) {
          const r = await db.completeRun(runId, p.finished, recorded);
          return r.completed ? { kind: 'done', status: p.finished.status } : { kind: 'reload' };
        }
        // Inputs resolve to the run's own inputs and emit no event: applied in memory only.
        if (recorded.length) {
          const applied = await db.applyActions(runId, recorded);
          if (applied.applied) applyFreeActions(results, timers, free);
          else blocked = true;
        } else applyFreeActions(results, timers, free);
        if (!blocked) {
          for (const a of executes) {
            inflight.add(a.nodeId);
            steps.executeStep({ runId, nodeId: a.nodeId }).then(
              (outcome) => void done.push({ nodeId: a.nodeId, outcome }),
              (error: unknown) => void done.push({ nodeId: a.nodeId, error }),
            );
          }
          view.runningSteps = [...inflight];
          if (free.length && executes.length === 0) continue; // state moved: plan again at once
          if (inflight.size === 0) {
            if (p.waiting?.kind === 'timer') {
              const r = await db.suspendRun(runId, { reason: 'wait_timer', resumeAt: p.waiting.until });
              return r.changed ? { kind: 'park', until: p.waiting.until } : { kind: 'reload' };
            }
            if (p.actions.length === 0) {
              const r = await db.failStuckRun(runId);
              return r.failed ? { kind: 'done', status: 'failed' } : { kind: 'reload' };
            }
          }
        }
      }
      if (inflight.size === 0) {
        if (failure) throw failure;
        return { kind: 'reload' };
      }
      // Wait for a step to finish, or (when a delay runs alongside the steps) for its due time.
      if (done.length === 0) {
        const due = blocked ? null : nextDue(timers);
        if (due === null) await condition(() => done.length > 0);
        else await condition(() => done.length > 0, Math.max(1, due - Date.now()));
      }
      for (const next of done.splice(0)) {
        inflight.delete(next.nodeId);
        if ('error' in next) {
          blocked = true;
          failure ??= next.error;
        } else if (next.outcome.type === 'recorded') {
          results[next.nodeId] = next.outcome.result;
        } else {
          blocked = true; // suspended for credentials, or the run ended / is no longer running
        }
      }
      view.runningSteps = [...inflight];
    }
  }

  async function drive(): Promise<RunWorkflowResult> {
    if (!admitted) {
      const ended = await awaitAdmission();
      if (ended) return { runId, status: ended.ended };
    }
    view.phase = 'preparing';
    const prepared = await db.prepareRun(runId);
    if (isTerminal(prepared.status)) return { runId, status: prepared.status };
    let state: RunState | null = prepared.state ?? null;
    let failures = 0;

    for (;;) {
      if (workflowInfo().continueAsNewSuggested) {
        // Everything lives in Postgres: a fresh execution picks the run up where it is.
        return continueAsNew<typeof runWorkflow>({ runId, admitted: true });
      }
      state ??= await db.loadRunState(runId);
      const s: RunState | null = state;
      state = null;
      if (!s || isTerminal(s.status)) {
        view.phase = 'ended';
        return { runId, status: s?.status ?? null };
      }
      if (s.status === 'pending') {
        if (s.phase === 'queued') {
          admitted = false;
          const ended = await awaitAdmission();
          if (ended) return { runId, status: ended.ended };
        }
        view.phase = 'preparing';
        const again = await db.prepareRun(runId);
        state = again.state ?? null;
        continue;
      }
      if (s.status === 'suspended') {
        if (s.suspendReason === 'wait_timer' && s.resumeAt !== null) await sleepUntil(s.resumeAt);
        else await awaitCredentials();
        continue;
      }
      let outcome: Advance;
      try {
        outcome = await advance(s);
        failures = 0;
      } catch (err) {
        // A step activity failed all its attempts (infrastructure): pause, reload and go on, like the
        // embedded engine's driver. Anything else (a cancellation, a bug) propagates.
        if (!(err instanceof ActivityFailure) || isCancellation(err)) throw err;
        failures++;
        view.phase = 'retrying';
        const ms = Math.min(RETRY_MAX_MS, RETRY_BASE_MS * 2 ** Math.min(failures - 1, 8));
        view.until = Date.now() + ms;
        await sleep(ms);
        view.until = null;
        continue;
      }
      if (outcome.kind === 'done') {
        view.phase = 'ended';
        return { runId, status: outcome.status };
      }
      if (outcome.kind === 'park') await sleepUntil(outcome.until);
      // reload: the next loadRunState tells what the run is now.
    }
  }

  /** A wait_timer suspension: sleep until the due time, then resume (fenced: only a timer suspension). */
  async function sleepUntil(until: number): Promise<void> {
    view.phase = 'waiting_timer';
    view.until = until;
    const ms = until - Date.now();
    if (ms > 0) await sleep(ms);
    view.until = null;
    await db.resumeRun(runId, 'wait_timer');
  }

  /** A wait_signal suspension: wait for credentials (or re-check now and then), then resume. */
  async function awaitCredentials(): Promise<void> {
    view.phase = 'waiting_signal';
    if (credentialsSignals === credentialsConsumed) {
      const signalled = await condition(() => credentialsSignals > credentialsConsumed, SIGNAL_RECHECK_MS);
      if (!signalled) return; // re-check the run (the next loadRunState)
    }
    credentialsConsumed = credentialsSignals;
    await db.resumeRun(runId, 'wait_signal');
  }

  try {
    return await scope.run(drive);
  } catch (err) {
    if (!isCancellation(err)) throw err;
    view.phase = 'ended';
    if (cancelRequested) return { runId, status: 'cancelled' }; // committed by the cancel-run service
    // Cancelled through Temporal itself: commit the cancellation, then end as cancelled in Temporal too.
    await CancellationScope.nonCancellable(() => db.cancelRun(runId));
    throw err;
  }
}

