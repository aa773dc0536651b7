import {
  ActivityCancellationType,
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  condition,
  continueAsNew,
  isCancellation,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  sleep,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
// The run driver is pure (no I/O, no clock, no randomness): safe in the workflow sandbox, and the very
// code the embedded engine runs.
import { nextRunMove, type AdvanceResult, type StepEnd } from '../src/domain/graph/run-driver.ts';
// Types only: the activity implementations (database, providers) never enter the workflow bundle.
import type * as activities from '../src/engine/temporal/activities.ts';
import type { StepReport } from '../src/engine/temporal/activities.ts';
import {
  admittedSignal,
  credentialsSuppliedSignal,
  RUN_FAILED_TYPE,
  searchAttributes,
  stateQuery,
  type RunWorkflowArgs,
  type RunWorkflowResult,
  type RunWorkflowView,
} from './definitions.ts';

/**
 * One run = one workflow execution (workflow id = run id). The workflow keeps only the waiting; the
 * shared run driver (src/domain/graph/run-driver.ts, pure) decides, inside the `advanceRun` local activity,
 * exactly as it does for the embedded engine, and every database write is an activity or a local one
 * (fenced in SQL, idempotent).
 *
 *  1. Admission: waits for the `admitted` signal (sent by the admission loop after admitQueuedRuns
 *     moved the run out of the queue, DB-safe across processes). Every ADMISSION_RECHECK it looks at
 *     the run itself, so a lost signal or a queue timeout (the run failed in the queue) is noticed.
 *  2. loop { advanceRun (one local activity: start, free actions and in-memory steps as one batch,
 *     completion) → executeStep activities for the I/O steps it names, concurrently (parallel branches)
 *     → wait for a step or the next timer due }. A run of in-memory steps only is one workflow task.
 *  3. advanceRun answers `park` (the run is suspended with wait_timer): a durable `sleep` until the due
 *     time, then advanceRun resumes it. `await_credentials` (wait_signal): `condition()` on the
 *     `credentialsSupplied` signal, then advanceRun resumes it.
 *  4. A Temporal cancellation (the API's cancel, the UI, the CLI) cancels everything: running step
 *     activities are cancelled (their AbortSignal fires through the heartbeat), timers and waits stop,
 *     the cancelRun activity commits the cancellation (a no-op when the API already did) and the
 *     execution closes as Canceled.
 *  4b. A Cancel-After deadline (args.deadline) is a durable timer: when it fires before the run ended, the
 *     run is cancelled like the API's cancel (driveUntil) and the execution closes as Canceled too.
 *  5. The execution closes the way the run ended: Completed, Failed (a non-retryable application
 *     failure carrying the run's buyer-safe reason) or Canceled (docs/temporal-operations.md). A run
 *     found cancelled without a Temporal cancellation of its execution (its deadline, or the API's
 *     cancel seen before its request) has the worker ask for one (closeCanceled).
 *
 * Activity arguments and results are small facts (ids, statuses, due times): node values and outputs
 * stay in Postgres, far from Temporal's payload limit. The RunStatus / RunOutcome search attributes
 * follow the statuses those facts carry.
 */

type Activities = activities.RunActivities;

/** Database activities: short, idempotent and fenced, so retried until they succeed. */
const DB_RETRY = { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds' } as const;

/**
 * The database activities as local activities: the worker runs them inside the workflow task that calls
 * them (no activity task, no round trip through the server), so a run of in-memory steps is one
 * workflow task. Executions started before this patch keep their activities (DB_ACTIVITIES_LOCAL).
 */
const localDb = proxyLocalActivities<Activities>({ startToCloseTimeout: '30 seconds', retry: DB_RETRY });
const activityDb = proxyActivities<Activities>({ startToCloseTimeout: '30 seconds', retry: DB_RETRY });

/**
 * The patch (Temporal's workflow versioning) that made the database activities local: `patched` is
 * false only while replaying a history recorded before it, which then replays with activities. When it
 * may be deprecated: docs/temporal-operations.md#versioning.
 */
export const DB_ACTIVITIES_LOCAL = 'db-activities-local';

/** The patch that added the Cancel-After deadline's timer: histories recorded before it replay without one. */
export const RUN_DEADLINE = 'run-deadline';

/**
 * The patch that closes a run cancelled without a Temporal cancellation (its deadline) as Canceled:
 * histories recorded before it replay completing such a run.
 */
export const CANCELED_CLOSE = 'canceled-close';

/** The database activities, local ones unless the history being replayed predates the patch. */
function db(): Pick<Activities, 'advanceRun' | 'runStatus' | 'cancelRun' | 'requestCancellation'> {
  return patched(DB_ACTIVITIES_LOCAL) ? localDb : activityDb;
}

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
/** Pause after a step activity failed all its attempts, doubling up to RETRY_MAX_MS. */
const RETRY_BASE_MS = 5_000;
const RETRY_MAX_MS = 60_000;

type StepDone = StepEnd<StepReport>;
/** What the step loop ends with: advanceRun's answer when the workflow must wait (not `wait`). */
type Settled = Exclude<AdvanceResult, { kind: 'wait' }>;

export async function runWorkflow(args: RunWorkflowArgs): Promise<RunWorkflowResult> {
  const runId = args.runId;
  let admitted = args.admitted === true;
  let credentialsSignals = 0;
  let credentialsConsumed = 0;
  const view: RunWorkflowView = { runId, phase: 'queued', runningSteps: [], until: null };

  setHandler(admittedSignal, () => {
    admitted = true;
  });
  setHandler(credentialsSuppliedSignal, () => {
    credentialsSignals++;
  });
  setHandler(stateQuery, () => ({ ...view, runningSteps: [...view.runningSteps] }));

  // The client sets RunStatus=pending at start; from then on the statuses the activities report.
  let shownStatus: string | null = 'pending';
  function showStatus(status: string | null, outcome: string | null = null): void {
    if (status === null || status === shownStatus) return;
    shownStatus = status;
    upsertSearchAttributes([{ key: searchAttributes.runStatus, value: status }, ...(outcome ? [{ key: searchAttributes.runOutcome, value: outcome }] : [])]);
  }

  type Ended = { status: string | null; outcome?: string | null; reason: string | null };
  /** Waits for the `admitted` signal; returns how the run ended when it ended while queued (queue timeout, cancel). */
  async function awaitAdmission(): Promise<Ended | null> {
    view.phase = 'queued';
    showStatus('pending');
    while (!admitted) {
      if (await condition(() => admitted, ADMISSION_RECHECK_MS)) break;
      const s = await db().runStatus(runId);
      if (!s || nextRunMove(s, Date.now()).kind === 'end') return { status: s?.status ?? null, outcome: s?.outcome ?? null, reason: s?.reason ?? null };
      if (s.status !== 'pending' || (s.phase !== 'queued' && s.phase !== 'scheduled')) admitted = true;
    }
    return null;
  }

  /**
   * advanceRun, and the I/O steps it names, until the run must wait for something other than a step:
   * ended, queued, parked on a timer, waiting for credentials (or `again`).
   */
  async function steer(): Promise<Settled> {
    view.phase = 'running';
    const inflight = new Set<string>();
    const done: StepDone[] = [];
    let blocked = false;
    /** The first step activity's failure, rethrown once no step is in flight. */
    let failure: { error: unknown } | null = null;
    let due: number | null = null;
    let settled: Settled | null = null;
    /** advanceRun's answer as a step activity gave it (it went on driving the run after its step). */
    let advanced: AdvanceResult | null = null;

    for (;;) {
      if (!blocked) {
        const r = advanced ?? (await db().advanceRun(runId, [...inflight]));
        advanced = null;
        if (r.kind === 'wait') {
          showStatus('running');
          // A step alone, with no timer beside it: its activity drives the run on after recording it
          // (one activity instead of two), since nothing else can move the run meanwhile.
          const advance = inflight.size === 0 && r.start.length === 1 && r.due === null;
          for (const nodeId of r.start) {
            if (inflight.has(nodeId)) continue;
            inflight.add(nodeId);
            steps.executeStep({ runId, nodeId, ...(advance ? { advance: true } : {}) }).then(
              (report) => void done.push({ nodeId, report }),
              (error: unknown) => void done.push({ nodeId, error }),
            );
          }
          due = r.due;
          view.runningSteps = [...inflight];
        } else if (inflight.size === 0) {
          return r;
        } else {
          // The run stopped moving while steps are still in flight: let them end first.
          blocked = true;
          settled = r;
        }
      }
      if (inflight.size === 0) {
        if (failure) throw failure.error;
        return settled ?? { kind: 'again' };
      }
      // Wait for a step to finish, or (when a delay runs alongside the steps) for its due time.
      if (done.length === 0) {
        if (due === null || blocked) await condition(() => done.length > 0);
        else await condition(() => done.length > 0, Math.max(1, due - Date.now()));
      }
      for (const next of done.splice(0)) {
        inflight.delete(next.nodeId);
        if ('error' in next) {
          blocked = true;
          failure ??= { error: next.error };
        } else if (next.report.next) {
          advanced = next.report.next;
        } else if (next.report.type !== 'recorded') {
          blocked = true; // suspended for credentials, or the run ended / is no longer running
        }
      }
      view.runningSteps = [...inflight];
    }
  }

  async function drive(): Promise<RunWorkflowResult> {
    if (!admitted) {
      const ended = await awaitAdmission();
      if (ended) return end(ended.status, ended.outcome, ended.reason);
    }
    let failures = 0;

    for (;;) {
      if (workflowInfo().continueAsNewSuggested) {
        // Everything lives in Postgres: a fresh execution picks the run up where it is.
        return continueAsNew<typeof runWorkflow>({ runId, admitted: true, ...(args.deadline === undefined ? {} : { deadline: args.deadline }) });
      }
      let r: Settled;
      try {
        r = await steer();
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
      switch (r.kind) {
        case 'ended':
          return end(r.status, r.outcome, r.reason ?? null);
        case 'queued': {
          admitted = false;
          const ended = await awaitAdmission();
          if (ended) return end(ended.status, ended.outcome, ended.reason);
          break;
        }
        case 'park':
          showStatus('suspended');
          await sleepUntil(r.until);
          break;
        case 'await_credentials':
          showStatus('suspended');
          await awaitCredentials();
          break;
        case 'again':
          break;
      }
    }
  }

  /** Closes the execution the way the run ended: a failed run fails it, with the run's buyer-safe reason. */
  async function end(status: string | null, outcome: string | null = null, reason: string | null = null): Promise<RunWorkflowResult> {
    if (status === 'cancelled' && patched(CANCELED_CLOSE)) return closeCanceled();
    view.phase = 'ended';
    showStatus(status, outcome);
    if (status === 'failed') {
      throw ApplicationFailure.create({ type: RUN_FAILED_TYPE, message: reason ?? 'the run failed', nonRetryable: true, details: [{ runId }] });
    }
    return { runId, status };
  }

  /** Set by closeCanceled: the run's cancellation is committed, so the Temporal cancellation that follows has nothing to commit. */
  let cancellationCommitted = false;

  /**
   * Closes the execution of a cancelled run as Canceled, which Temporal allows only on a cancellation
   * request: the worker asks for one (the requestCancellation activity; a workflow cannot ask for its
   * own), and its arrival cancels the wait below, whose cancellation ends the workflow (runWorkflow).
   */
  async function closeCanceled(): Promise<never> {
    cancellationCommitted = true;
    if (!CancellationScope.current().consideredCancelled) {
      await CancellationScope.nonCancellable(() => db().requestCancellation(runId));
    }
    return CancellationScope.current().cancelRequested;
  }

  /** A wait_timer suspension: sleep until the due time (the next advanceRun resumes the run). */
  async function sleepUntil(until: number): Promise<void> {
    view.phase = 'waiting_timer';
    view.until = until;
    const ms = until - Date.now();
    if (ms > 0) await sleep(ms);
    view.until = null;
  }

  /**
   * A wait_signal suspension: wait for the signal, with no timer (the next advanceRun resumes the run).
   * The credentials deadline is kept in Postgres: a run past it is failed there and its workflow
   * signalled the same way (docs/temporal-operations.md).
   */
  async function awaitCredentials(): Promise<void> {
    view.phase = 'waiting_signal';
    if (credentialsSignals === credentialsConsumed) await condition(() => credentialsSignals > credentialsConsumed);
    credentialsConsumed = credentialsSignals;
  }

  /**
   * The Cancel-After deadline: a durable timer beside the run; when it fires first, the drive is cancelled
   * and the run with it as the API's cancel would (the cancelRun activity: not charged, run.cancelled
   * webhook), whatever it was doing (queued, running, suspended), and the execution closes as Canceled
   * (before the CANCELED_CLOSE patch: completes).
   */
  async function driveUntil(deadline: number): Promise<RunWorkflowResult> {
    const scope = new CancellationScope();
    let due = false;
    void sleep(Math.max(1, deadline - Date.now())).then(
      () => {
        due = true;
        scope.cancel();
      },
      () => undefined, // the workflow itself was cancelled: the drive's scope is cancelled with it
    );
    try {
      return await scope.run(drive);
    } catch (err) {
      if (!due || !isCancellation(err)) throw err;
      const cancelled = await CancellationScope.nonCancellable(() => db().cancelRun(runId));
      return end(cancelled.status, cancelled.outcome ?? null, cancelled.reason);
    }
  }

  try {
    // Histories written before the deadline existed replay without its timer.
    return await (args.deadline !== undefined && patched(RUN_DEADLINE) ? driveUntil(args.deadline) : drive());
  } catch (err) {
    if (!isCancellation(err)) throw err;
    // Cancelled through Temporal (by the API, which has committed the cancellation already, from the
    // UI / CLI, or at this workflow's own request): commit it (unless this workflow did, else a no-op
    // when done), then close as Canceled, or as the run ended meanwhile.
    if (!cancellationCommitted) {
      const r = await CancellationScope.nonCancellable(() => db().cancelRun(runId));
      if (r.status !== 'cancelled') return end(r.status, r.outcome ?? null, r.reason);
    }
    view.phase = 'ended';
    showStatus('cancelled');
    throw err;
  }
}
