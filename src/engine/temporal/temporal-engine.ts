import type { NativeConnection, Worker } from '@temporalio/worker';
import { fork } from '../../runs/deps.ts';
import type { EnginePort } from '../../runs/engine-port.ts';
import { admitQueuedRunsDetailed } from '../../runs/admit-runs.ts';
import type { RunsDeps } from '../../runs/deps.ts';
import { knownRunAccount } from '../../runs/run-state.ts';
import { resumeRun } from '../../runs/transitions.ts';
import { cancelOverdueRuns } from '../../runs/cancel-run.ts';
import { enterDueRuns } from '../../runs/scheduled-runs.ts';
import { TemporalRunClient, type RunWorkflowClient, type TracedMemo } from './client.ts';
import { prepareWhenReachable } from './wait-for-temporal.ts';
import { ClosedWorkflowReconciler } from './reconcile-closed.ts';
import { query } from '../../db/statement.ts';
import { SweepSchedule } from '../sweep-schedule.ts';
import type { RunPhase } from '../../domain/run-status.ts';
import {
  MARK_TEMPORAL_STARTED,
  STALLED_TEMPORAL_RUNS,
  TEMPORAL_RUN_MEMOS,
  TEMPORAL_RUNS_LIVE,
  UNHEARD_RESUMES,
  UNSTARTED_TEMPORAL_RUNS,
} from '../../sql/temporal-runs.ts';

/**
 * The Temporal run engine, client side (ENGINE=temporal). Every run is a `runWorkflow` execution whose
 * workflow id is the run id; the worker process (`npm run worker`, src/worker.ts) executes it.
 *
 * - runAccepted: in the background (the API answers at once), runs an admission first, so a run with
 *   room is admitted before its workflow exists and starts admitted (one start, no signal); otherwise
 *   starts its workflow queued. Idempotent (an existing execution is fine), with a memo (run id,
 *   account handle, workflow id, version id); marks the run as started in Postgres
 *   (`runs.lease_owner = 'temporal'`, a column the embedded engine uses for its leases and Temporal runs
 *   otherwise leave empty).
 * - Admission: `admitQueuedRuns` (FIFO, RUN_CAPACITY, per-account limits, queue timeout; serialised in
 *   Postgres by an advisory lock, so any number of API and worker processes may run it at once) moves
 *   runs to phase `starting`; an admitted run whose workflow was never started is started admitted, one
 *   already started gets the `admitted` signal (signal-with-start, which also covers a start that lost
 *   a race). It runs when a run is
 *   accepted or cancelled here, when the worker sees a run end (activity hook), and every
 *   `admissionIntervalMs` in every process that started this engine while it has Temporal runs queued
 *   or in flight.
 * - Idle (src/engine/sweep-schedule.ts): the periodic admission, sweep and reconcile run only while a
 *   one-statement check finds a Temporal run queued or in flight; with none, the next check is
 *   `idleCheckMs` later, or sooner when a run is accepted, cancelled or ends here, or another process
 *   announces run activity on the event bus.
 * - Sweep (every `sweepIntervalMs`): starts the workflows of runs accepted more than `startGraceMs`
 *   ago that were never marked started (the process died between the commit and the start), and
 *   re-signals runs admitted more than `startGraceMs` ago that are still not prepared (a lost signal).
 *   The workflow also re-checks the run itself every minute while queued. It also signals
 *   `credentialsSupplied` again to runs resumed from a credentials wait that have not moved since (the
 *   workflow's wait has no timer, so a lost signal would leave it waiting).
 * - Reconcile (every `reconcileIntervalMs`): fails the runs whose workflow Temporal closed without the
 *   workflow ending the run (Terminate, execution timeout), freeing their capacity (reconcile-closed.ts).
 * - Delayed starts: each admission round first moves the scheduled runs whose start has come into the
 *   line (src/runs/scheduled-runs.ts); a scheduled run has no workflow until then, so a reschedule or a
 *   cancel before its start touches Postgres only.
 * - Deadlines: a run's Cancel-After deadline is passed to its workflow, whose durable timer cancels the
 *   run (workflows/run-workflow.ts); the sweep cancels the runs past it whose workflow never started.
 * - runCancelled: requests the workflow's Temporal cancellation (the cancel-run service has already
 *   committed the run's), so the execution closes as Canceled.
 * - credentialsSupplied: resumes the wait_signal suspension in Postgres first (so the API answers with
 *   the run running, exactly like the embedded engine), then signals `credentialsSupplied`.
 * - ready(): a Temporal health check with a short deadline.
 */

export interface TemporalEngineOptions {
  /** The Temporal client; by default a lazy connection to config.temporal. Tests inject a fake. */
  client?: RunWorkflowClient;
  /** Runs in flight at once; default config.runCapacity. */
  capacity?: number;
  /** Periodic admission (also expires queued runs). Default 1 s. */
  admissionIntervalMs?: number;
  /** Periodic sweep for never-started workflows and lost admissions. Default 5 s. */
  sweepIntervalMs?: number;
  /** Periodic look for runs whose workflow Temporal closed (terminate, timeout; reconcile-closed.ts). Default 10 s. */
  reconcileIntervalMs?: number;
  /**
   * With no Temporal run queued or in flight, the longest time between two checks for one: how late a
   * run another process left queued, without announcing it, may be seen. Default 30 s.
   */
  idleCheckMs?: number;
  /** How old an unstarted / unprepared run must be before the sweep acts on it. Default 10 s. */
  startGraceMs?: number;
  /** Health-check deadline for ready(). Default 2 s. */
  readyTimeoutMs?: number;
  /** Run the periodic admission and sweep (default true). */
  background?: boolean;
  /**
   * Also run a worker for the run workflow in this process (`npm start` with ENGINE=temporal, unless
   * TEMPORAL_WORKER=off). Default false: the engine is then only the client side.
   */
  worker?: boolean;
  /** Called when the in-process worker stops by itself (a fatal error); `npm run worker` exits then. */
  onWorkerFailed?: (err: unknown) => void;
}

/** A run's memo with what the engine needs to know before starting or signalling its workflow. */
type RunRecord = TracedMemo & { phase: string | null; started: boolean };

/** `runs.lease_owner` of a Temporal run whose workflow execution was started. */
export const TEMPORAL_STARTED_MARK = 'temporal';

export class TemporalEngine implements EnginePort {
  readonly name = 'temporal' as const;
  readonly client: RunWorkflowClient;
  readonly #deps: RunsDeps;
  readonly #capacity: number;
  readonly #admissionIntervalMs: number;
  readonly #sweepIntervalMs: number;
  readonly #reconcileIntervalMs: number;
  readonly #reconciler: ClosedWorkflowReconciler;
  readonly #startGraceMs: number;
  readonly #readyTimeoutMs: number;
  readonly #background: boolean;
  readonly #ownsClient: boolean;
  readonly #withWorker: boolean;
  readonly #onWorkerFailed: ((err: unknown) => void) | undefined;
  #worker: { worker: Worker; connection: NativeConnection; ownConnection: boolean; running: Promise<void> } | null = null;
  #workerFailed = false;

  #state: 'new' | 'running' | 'stopped' = 'new';
  readonly #schedule: SweepSchedule;
  /** When the periodic sweep and reconcile last ran (epoch ms); they run on the admission's beat, less often. */
  #sweptAt = 0;
  #reconciledAt = 0;
  #unlistenActivity: (() => void) | null = null;
  #reconciling: Promise<string[]> | null = null;
  #admitting: Promise<void> | null = null;
  #admitAgain = false;
  #expireDue = true;
  #sweeping: Promise<void> | null = null;
  readonly #starting = new Set<Promise<void>>();

  constructor(deps: RunsDeps, opts: TemporalEngineOptions = {}) {
    this.#deps = deps;
    this.#ownsClient = !opts.client;
    // With a worker here, the client starts workflows on the worker's connection (eager start).
    this.client = opts.client ?? new TemporalRunClient(deps.config.temporal, { eagerStart: opts.worker ?? false });
    this.#capacity = opts.capacity ?? deps.config.runCapacity;
    this.#admissionIntervalMs = opts.admissionIntervalMs ?? 1_000;
    this.#sweepIntervalMs = opts.sweepIntervalMs ?? 5_000;
    this.#reconcileIntervalMs = opts.reconcileIntervalMs ?? 10_000;
    this.#reconciler = new ClosedWorkflowReconciler(deps, this.client);
    this.#startGraceMs = opts.startGraceMs ?? 10_000;
    this.#readyTimeoutMs = opts.readyTimeoutMs ?? 2_000;
    this.#background = opts.background ?? true;
    this.#withWorker = opts.worker ?? false;
    this.#onWorkerFailed = opts.onWorkerFailed;
    this.#schedule = new SweepSchedule({
      check: () => this.#periodicWork(),
      sweep: () => this.#periodic(),
      busyMs: this.#admissionIntervalMs,
      idleMs: opts.idleCheckMs ?? 30_000,
      failed: (err) => this.#deps.log.error({ err }, 'temporal engine check failed'),
    });
  }

  async start(): Promise<void> {
    if (this.#state === 'running') return;
    // The runtime before any native connection (the client's is one when it shares the worker's).
    if (this.#withWorker) (await import('./run-worker.ts')).installTemporalRuntime(this.#deps.log, this.#deps.config.metrics.temporalAddress);
    // A wrong address or namespace stops the start here, with one clear line (ConfigError); a server
    // not up yet is waited for a bounded time.
    await prepareWhenReachable(this.client, this.#deps.config.temporal.connect, this.#deps.log);
    if (this.#withWorker) await this.#startWorker();
    this.#state = 'running';
    if (!this.#background) return;
    this.#expireDue = true;
    void this.admitSoon();
    this.#sweptAt = this.#reconciledAt = Date.now();
    // Runs accepted, admitted or ended by other processes: look at the busy pace again.
    this.#unlistenActivity = this.#deps.bus.onActivity?.(() => this.#schedule.poke()) ?? null;
    this.#schedule.start();
  }

  /**
   * Whether any Temporal run is queued or in flight (the periodic work has something to look at now), and
   * when the next delayed start comes (an admission round moves it into the line).
   */
  async #periodicWork(): Promise<{ queued: boolean; dueAt: number | null }> {
    const [row] = await query<{ live: boolean; next_start_ms: number | null }>(fork(this.#deps), TEMPORAL_RUNS_LIVE, []);
    return { queued: row?.live === true, dueAt: row?.next_start_ms == null ? null : Number(row.next_start_ms) };
  }

  /**
   * One beat while Temporal runs are queued or in flight: an admission (expiring what waited too long),
   * and the sweep and the reconcile when their intervals have passed, those two in the background so a
   * slow Temporal answer does not hold the admission's beat.
   */
  async #periodic(): Promise<void> {
    if (this.#state !== 'running') return;
    const now = Date.now();
    if (now - this.#sweptAt >= this.#sweepIntervalMs) {
      this.#sweptAt = now;
      void this.sweep();
    }
    if (now - this.#reconciledAt >= this.#reconcileIntervalMs) {
      this.#reconciledAt = now;
      void this.reconcileClosed();
    }
    this.#expireDue = true;
    await this.admitSoon();
  }

  async stop(): Promise<void> {
    if (this.#state !== 'running') return;
    this.#state = 'stopped';
    this.#schedule.stop();
    this.#unlistenActivity?.();
    this.#unlistenActivity = null;
    // The beat in flight first: it may have set off a sweep or a reconcile, awaited next.
    await this.#schedule.inFlight?.catch(() => undefined);
    await Promise.allSettled([...this.#starting, this.#admitting, this.#sweeping, this.#reconciling]);
    await this.#stopWorker();
    if (this.#ownsClient) await this.client.close();
  }

  /** The in-process worker: the same worker `npm run worker` runs, sharing this process's deps. */
  async #startWorker(): Promise<void> {
    const { NativeConnection } = await import('@temporalio/worker');
    const { createRunWorker } = await import('./run-worker.ts');
    const { address, namespace, taskQueue } = this.#deps.config.temporal;
    // The client's own connection when it is ours (eager start); a client given by a test has its own.
    const shared = this.#ownsClient && this.client instanceof TemporalRunClient ? this.client : null;
    const connection = shared ? await shared.workerConnection() : await NativeConnection.connect({ address });
    const ownConnection = shared === null;
    try {
      const worker = await createRunWorker(this.#deps, {
        connection,
        namespace,
        taskQueue,
        hooks: {
          onRunEnded: () => {
            this.#schedule.poke();
            void this.admitSoon();
          },
        },
      });
      const running = worker.run().catch((err: unknown) => {
        this.#workerFailed = true;
        this.#deps.log.fatal({ err }, 'the in-process Temporal worker stopped; runs no longer progress in this process');
        this.#onWorkerFailed?.(err);
      });
      this.#worker = { worker, connection, ownConnection, running };
    } catch (err) {
      if (ownConnection) await connection.close().catch(() => undefined);
      throw err;
    }
  }

  async #stopWorker(): Promise<void> {
    const w = this.#worker;
    if (!w) return;
    this.#worker = null;
    if (w.worker.getState() === 'RUNNING') w.worker.shutdown();
    await w.running;
    // A shared connection is closed with the client, after this.
    if (w.ownConnection) await w.connection.close().catch(() => undefined);
  }

  /**
   * Starts the workflow and admits, without holding up the API's answer (the run is durably accepted;
   * a start that never happens is done by the sweep of any process).
   */
  async runAccepted(runId: string): Promise<void> {
    this.#schedule.poke();
    // Admission first: a run with room is then started admitted by it (one start, no signal).
    const task = this.admitSoon()
      .then(() => this.#startWorkflow(runId))
      .catch((err) => this.#deps.log.warn({ err, runId, accountId: knownRunAccount(runId) }, 'could not start a run workflow; the sweep will'))
      .finally(() => this.#starting.delete(task));
    this.#starting.add(task);
  }

  /** Starts the workflow of a run the admission did not start (queued, or admitted elsewhere). */
  async #startWorkflow(runId: string): Promise<void> {
    const [memo] = await this.#memos([runId]);
    // A scheduled run's workflow starts once the run is in the line (an admission round moves it there).
    if (!memo || memo.started || memo.phase === 'scheduled') return;
    await this.client.start(memo, { admitted: memo.phase !== 'queued' });
    await this.#markStarted([runId]);
  }

  async runCancelled(runId: string): Promise<void> {
    this.#schedule.poke();
    try {
      await this.client.cancel(runId);
    } finally {
      void this.admitSoon(); // a cancelled run frees capacity
    }
  }

  async #signalQuietly(runId: string): Promise<void> {
    await this.client.signal(runId, 'credentialsSupplied').catch((err: unknown) => {
      this.#deps.log.warn({ err, runId, accountId: knownRunAccount(runId) }, "could not signal a run's workflow to look at its run again");
    });
  }

  async credentialsSupplied(runId: string): Promise<void> {
    this.#schedule.poke();
    await resumeRun(this.#deps, runId, { reason: 'wait_signal' });
    await this.client.signal(runId, 'credentialsSupplied');
  }

  async ready(): Promise<boolean> {
    if (this.#workerFailed) return false;
    return this.client.ready(this.#readyTimeoutMs);
  }

  // -------------------------------------------------------------------------------------------------
  // Admission

  /** Runs an admission now, or once more after the one in progress; settles when that round has run. */
  admitSoon(): Promise<void> {
    if (this.#state !== 'running') return Promise.resolve();
    if (this.#admitting) {
      this.#admitAgain = true;
      return this.#admitting;
    }
    const admitting = (async () => {
      try {
        do {
          this.#admitAgain = false;
          await this.admitOnce();
        } while (this.#admitAgain && this.#state === 'running');
      } catch (err) {
        this.#deps.log.error({ err }, 'temporal run admission failed');
      } finally {
        // In the same step as the loop's last test: a caller who finds this round still set is sure to
        // have set #admitAgain before that test, so the round it waits for sees its run.
        this.#admitting = null;
      }
    })();
    this.#admitting = admitting;
    return admitting;
  }

  /** One admission: admitQueuedRuns, then each admitted run's workflow started admitted or signalled. */
  async admitOnce(): Promise<string[]> {
    const expireQueued = this.#expireDue;
    this.#expireDue = false;
    // Delayed starts that have come join the line first (their workflows start from it: #startWorkflow).
    await enterDueRuns(this.#deps, this.name);
    const r = await admitQueuedRunsDetailed(this.#deps, { capacity: this.#capacity, engine: this.name, expireQueued });
    if (r.admitted.length) await this.#signalAdmitted(r.admitted);
    // Failed past the credentials deadline: the waiting workflow looks again and closes as Failed.
    await Promise.all((r.expiredWaits ?? []).map((runId) => this.#signalQuietly(runId)));
    return r.admitted;
  }

  async #signalAdmitted(runIds: string[]): Promise<void> {
    const memos = await this.#memos(runIds);
    const started: string[] = [];
    await Promise.all(
      memos.map(async (memo) => {
        try {
          // Never started: start it admitted; already started (here, or by a racing start): signal it.
          if (memo.started || (await this.client.start(memo, { admitted: true })) === 'already_started') await this.client.admit(memo);
          started.push(memo.runId);
        } catch (err) {
          // The run stays admitted (phase starting) in Postgres; the sweep signals it again.
          this.#deps.log.warn({ err, runId: memo.runId, accountId: knownRunAccount(memo.runId) }, 'could not signal an admitted run');
        }
      }),
    );
    await this.#markStarted(started);
  }

  // -------------------------------------------------------------------------------------------------
  // Sweep

  /** Starts workflows that were never started and re-signals admissions that were lost. */
  async sweep(): Promise<void> {
    if (this.#sweeping) return this.#sweeping;
    this.#sweeping = (async () => {
      try {
        const em = fork(this.#deps);
        const graceSecs = this.#startGraceMs / 1000;
        const unstarted = await query<{ id: string; phase: RunPhase | null }>(em, UNSTARTED_TEMPORAL_RUNS, [graceSecs]);
        if (unstarted.length) {
          const memos = await this.#memos(unstarted.map((r) => String(r.id)));
          const phases = new Map(unstarted.map((r) => [String(r.id), r.phase]));
          const done: string[] = [];
          for (const memo of memos) {
            try {
              await this.client.start(memo, { admitted: phases.get(memo.runId) !== 'queued' });
              done.push(memo.runId);
            } catch (err) {
              this.#deps.log.warn({ err, runId: memo.runId, accountId: knownRunAccount(memo.runId) }, 'could not start a run workflow');
            }
          }
          await this.#markStarted(done);
          if (done.length) this.#deps.log.info({ runs: done }, 'started run workflows that were never started');
        }
        const stalled = await query<{ id: string }>(em, STALLED_TEMPORAL_RUNS, [graceSecs]);
        if (stalled.length) await this.#signalAdmitted(stalled.map((r) => String(r.id)));
        // The credentials wait has no timer: a resume whose signal was lost is signalled again.
        const unheard = await query<{ id: string }>(em, UNHEARD_RESUMES, [graceSecs]);
        await Promise.all(unheard.map((r) => this.#signalQuietly(String(r.id))));
        // Past their Cancel-After deadline before their workflow started (a started one has its own timer).
        await cancelOverdueRuns(this.#deps, this, TEMPORAL_STARTED_MARK);
      } catch (err) {
        this.#deps.log.error({ err }, 'temporal engine sweep failed');
      }
    })();
    try {
      await this.#sweeping;
    } finally {
      this.#sweeping = null;
    }
  }

  /** Fails the runs whose workflow Temporal closed (reconcile-closed.ts); their capacity is admitted at once. */
  async reconcileClosed(): Promise<string[]> {
    if (this.#reconciling) return this.#reconciling;
    this.#reconciling = this.#reconciler.reconcile().catch((err: unknown) => {
      this.#deps.log.warn({ err }, 'could not look for runs whose workflow Temporal closed; trying again later');
      return [];
    });
    try {
      const failed = await this.#reconciling;
      if (failed.length) void this.admitSoon();
      return failed;
    } finally {
      this.#reconciling = null;
    }
  }

  // -------------------------------------------------------------------------------------------------

  async #memos(runIds: string[]): Promise<RunRecord[]> {
    if (runIds.length === 0) return [];
    type Row = { id: string; handle: string; workflow_id: string; version_id: string; name: string; label: string } & {
      trace_context: unknown;
      phase: string | null;
      lease_owner: string | null;
      deadline_ms: number | string | null;
      priority: number | string;
      concurrency_key: string | null;
    };
    const rows = await query<Row>(fork(this.#deps), TEMPORAL_RUN_MEMOS, [runIds]);
    return rows.map((r) => ({
      runId: String(r.id),
      accountHandle: String(r.handle),
      workflowId: String(r.workflow_id),
      versionId: String(r.version_id),
      workflowName: String(r.name),
      versionLabel: String(r.label),
      ...(r.trace_context ? { traceContext: r.trace_context } : {}),
      ...(r.deadline_ms === null || r.deadline_ms === undefined ? {} : { deadline: Math.round(Number(r.deadline_ms)) }),
      priority: Number(r.priority),
      concurrencyKey: r.concurrency_key,
      phase: r.phase,
      started: r.lease_owner === TEMPORAL_STARTED_MARK,
    }));
  }

  async #markStarted(runIds: string[]): Promise<void> {
    if (runIds.length === 0) return;
    await query(fork(this.#deps), MARK_TEMPORAL_STARTED, [TEMPORAL_STARTED_MARK, runIds]);
  }
}
