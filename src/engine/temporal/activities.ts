import { Context } from '@temporalio/activity';
import { WorkflowNotFoundError } from '@temporalio/common';
import { commitCancellation } from '../../runs/cancel-run.ts';
import { fork } from '../../runs/deps.ts';
import { traceStep } from '../../observability/trace-spans.ts';
import { knownRunAccount } from '../../runs/run-state.ts';
import type { RunEventBus } from '../../runs/run-event-bus.ts';
import { advanceRun } from '../drive-run.ts';
import type { AdvanceResult } from '../../domain/graph/run-driver.ts';
import type { RunsDeps } from '../../runs/deps.ts';
import type { StepOutcome } from '../../runs/record-step.ts';
import { isTerminal, type RunPhase, type RunStatus } from '../../domain/run-status.ts';
import { executeStep } from '../execute-step.ts';
import { query } from '../../db/statement.ts';
import { RUN_SCHEDULE } from '../../sql/runs.ts';

/**
 * The Temporal activities: the run operations shared with the embedded engine (the runs module,
 * src/runs/, and src/engine/execute-step.ts) bound to the worker's dependencies. Every argument and result is plain JSON. The
 * database activities are idempotent and fenced in SQL, so the workflow retries them freely;
 * `executeStep` heartbeats (on every published delta batch and on a timer, for long LLM streams and
 * slow HTTP calls) and passes the activity's cancellation signal down, so a cancelled run aborts its
 * in-flight provider call.
 *
 * `hooks.onRunEnded` is called after an activity that may have ended a run, so the worker admits the
 * next queued run at once instead of on its next periodic tick.
 */

export interface ActivityHooks {
  onRunEnded?: (runId: string) => void;
}

/** A light look at a run (no graph, no results), for the workflow's admission and signal re-checks. */
export interface RunStatusView {
  status: RunStatus;
  phase: RunPhase | null;
  /** A failed run's buyer-safe reason. */
  reason: string | null;
  /** A completed run's outcome. */
  outcome: string | null;
  suspendReason: 'wait_timer' | 'wait_signal' | null;
  /** Due time of a wait_timer suspension, epoch ms. */
  resumeAt: number | null;
}

/**
 * A step activity's answer: small facts for the workflow (whether the node's result is recorded), and
 * with `advance`, advanceRun's answer after it (`next`).
 */
export type StepReport = ({ type: 'recorded'; status: 'completed' | 'failed' | 'skipped' } | Exclude<StepOutcome, { type: 'recorded' }>) & {
  next?: AdvanceResult;
};

export interface ExecuteStepArgs {
  runId: string;
  nodeId: string;
  /**
   * The step is the only thing the run waits for: after recording it, drive the run on (advanceRun) in
   * the same activity, so a step costs one activity, not two.
   */
  advance?: boolean;
}

/** Heartbeat period when the activity has no heartbeat timeout (the mock environment). */
const DEFAULT_HEARTBEAT_MS = 5_000;

export function createActivities(deps: RunsDeps, hooks: ActivityHooks = {}) {
  const ended = (runId: string) => {
    try {
      hooks.onRunEnded?.(runId);
    } catch (err) {
      deps.log.warn({ err, runId, accountId: knownRunAccount(runId) }, 'onRunEnded hook failed');
    }
  };

  /** A light look at the run (status columns only). */
  async function runStatus(runId: string): Promise<RunStatusView | null> {
    const [r] = await query<{
      status: RunStatus;
      phase: RunPhase | null;
      reason: string | null;
      outcome: string | null;
      suspend_reason: string | null;
      resume_ms: string | number | null;
    }>(fork(deps), RUN_SCHEDULE, [runId]);
    if (!r) return null;
    return {
      status: r.status,
      phase: r.phase ?? null,
      reason: r.reason ?? null,
      outcome: r.outcome ?? null,
      suspendReason: (r.suspend_reason as RunStatusView['suspendReason']) ?? null,
      resumeAt: r.resume_ms === null || r.resume_ms === undefined ? null : Math.round(Number(r.resume_ms)),
    };
  }

  return {
    runStatus,

    /**
     * Everything but the I/O steps and the waiting, in one activity (src/engine/drive-run.ts): prepares
     * or starts the run, resumes a due timer, records free actions and in-memory steps as one batch,
     * suspends, completes. `running`: the steps the workflow has in flight. The answer is small facts
     * only: node values and outputs stay in Postgres.
     */
    async advanceRun(runId: string, running: string[] = []): Promise<AdvanceResult> {
      const r = await advanceRun(deps, runId, running);
      if (r.kind === 'ended') ended(runId);
      return r;
    },

    /**
     * The workflow itself was cancelled through Temporal (UI, CLI), not through the API: commit the
     * cancellation the way the API does (src/runs/cancel-run.ts: not charged, hold released, webhooks).
     */
    async cancelRun(runId: string): Promise<{ cancelled: boolean; status: RunStatus | null; reason: string | null; outcome?: string | null }> {
      const r = await commitCancellation(deps, runId);
      ended(runId);
      if (r.cancelled) return { cancelled: true, status: 'cancelled', reason: null };
      // Already terminal: cancelled by the API, or ended otherwise before the cancellation came.
      const view = await runStatus(runId);
      return { cancelled: false, status: view?.status ?? null, reason: view?.reason ?? null, outcome: view?.outcome ?? null };
    },

    /**
     * Asks Temporal to cancel the calling workflow execution, whose run is cancelled already (its Cancel-After
     * deadline, or the API's cancel seen before its request): an execution closes as Canceled only on a
     * cancellation request, and the server refuses one that a workflow sends itself.
     */
    async requestCancellation(runId: string): Promise<void> {
      const ctx = Context.current();
      const execution = ctx.info.workflowExecution;
      if (execution?.workflowId !== runId) throw new Error(`requestCancellation is for run ${runId}'s own workflow`);
      try {
        await ctx.client.workflow.getHandle(execution.workflowId, execution.runId).cancel();
      } catch (err) {
        if (!(err instanceof WorkflowNotFoundError)) throw err; // closed meanwhile: nothing left to cancel
      }
    },

    /** Runs one I/O step; answers whether it was recorded (the value stays in Postgres), then maybe advances. */
    async executeStep(args: ExecuteStepArgs): Promise<StepReport> {
      const ctx = Context.current();
      // No heartbeat in the first period: each one is a billed action, and a step that ends by then (its
      // start and its result are published too) has no progress to report; the timeouts still catch a lost worker.
      const period = Math.max(100, Math.floor((ctx.info.heartbeatTimeoutMs ?? DEFAULT_HEARTBEAT_MS * 3) / 3));
      const quietUntil = Date.now() + period;
      const beat = (details?: unknown) => {
        if (Date.now() < quietUntil) return;
        try {
          ctx.heartbeat(details);
        } catch {
          // Outside a real activity context heartbeats may be unavailable; never fail the step for it.
        }
      };
      // Every delta batch the step publishes is also a heartbeat (with the log's sequence as progress).
      const bus: RunEventBus = {
        publish: (runId, lastSequence) => {
          deps.bus.publish(runId, lastSequence);
          if (runId === args.runId) beat({ lastSequence });
        },
        subscribe: (runId, listener) => deps.bus.subscribe(runId, listener),
        publishCancel: (runIds) => deps.bus.publishCancel(runIds),
        onCancel: (listener) => deps.bus.onCancel(listener),
        close: () => deps.bus.close(),
      };
      const timer = setInterval(() => beat(), period);
      let report: StepReport;
      try {
        const outcome = await traceStep(args.runId, args.nodeId, () =>
          executeStep({ ...deps, bus }, { runId: args.runId, nodeId: args.nodeId }, ctx.cancellationSignal),
        );
        if (outcome.type === 'not_runnable' && outcome.status !== null && isTerminal(outcome.status)) ended(args.runId);
        report = outcome.type === 'recorded' ? { type: 'recorded', status: outcome.result.status } : outcome;
      } finally {
        clearInterval(timer);
      }
      if (!args.advance) return report;
      const next = await advanceRun(deps, args.runId, []);
      if (next.kind === 'ended') ended(args.runId);
      return { ...report, next };
    },
  };
}

export type RunActivities = ReturnType<typeof createActivities>;
