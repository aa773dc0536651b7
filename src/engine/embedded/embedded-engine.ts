import { randomUUID } from 'node:crypto';
import { traceRun, traceStep } from '../../observability/trace-spans.ts';
import { performMove, performStatusMove } from '../drive-run.ts';
import type { EnginePort } from '../../runs/engine-port.ts';
import { readRunTraceContext } from '../../runs/run-trace-context.ts';
import { nextRunMove, RunDriver } from '../../domain/graph/run-driver.ts';
import { admitQueuedRunsDetailed } from '../../runs/admit-runs.ts';
import { AdmissionPump } from './admission-pump.ts';
import type { RunsDeps } from '../../runs/deps.ts';
import type { StepArgs } from '../../runs/record-step.ts';
import { knownRunAccount, loadRunState, type RunState } from '../../runs/run-state.ts';
import { claimRun, claimUnleasedRuns, releaseLeases, renewLeases, sweepDue, type LeaseHolder } from '../../runs/leases.ts';
import { SweepSchedule } from '../sweep-schedule.ts';
import { enterDueRuns } from '../../runs/scheduled-runs.ts';
import { resumeRun } from '../../runs/transitions.ts';
import { cancelOverdueRuns } from '../../runs/cancel-run.ts';
import { executeStep } from '../execute-step.ts';
import { MAX_TIMEOUT_MS, nextStepDone, pauseDriver, type Driver, type LoopOutcome, type StepDone } from './driver.ts';

/**
 * The embedded run engine (ENGINE=embedded, the default): drives runs inside the API process with the
 * same pure run driver (src/domain/graph/run-driver.ts) and the same writes (src/engine/drive-run.ts, over the
 * runs module, src/runs/) as the Temporal engine. All run state lives in Postgres; this class only
 * holds what can be rebuilt from it: its leases, timers and the steps in flight.
 *
 * - Admission: `admitQueuedRuns` (FIFO, RUN_CAPACITY, per-account max_concurrent_runs, queue timeout)
 *   runs when a run is accepted, when a run ends and on the periodic sweep; concurrent requests for it coalesce
 *   into one admission at a time (admission-pump.ts). Admitted runs are leased here in the same statement.
 * - One async driver per in-flight run: `nextRunMove` says what the loaded run needs, a `RunDriver` drives
 *   it move by move (free actions, in-memory steps batched into one fenced statement or into the
 *   completion transaction, I/O steps run concurrently, a wait for a step or the next timer, finish); the
 *   driver keeps the state in memory between steps (it is the only writer while it holds the lease) and
 *   the run is reloaded from the database after anything unexpected. Nothing is published before it is
 *   committed; a batch lost in a crash is computed again.
 * - Suspension: with only a timer left the run is suspended (wait_timer) and the driver parks: it
 *   releases its lease and arms a setTimeout for the due time; a BYOK step without credentials
 *   suspends the run (wait_signal) and the driver parks until `credentialsSupplied`.
 * - Cancellation is committed by the service; `runCancelled` aborts the driver's AbortController, so
 *   in-flight LLM/HTTP work stops, and every write is fenced in SQL, so a late result never changes a
 *   terminal run. A cancel committed by another process arrives over the bus (`onCancel`, NOTIFY
 *   run_cancels); one missed while the bus was disconnected is found by the next lease renewal (the
 *   terminal run's lease is cleared).
 * - Deadlines: the sweep cancels the runs past their Cancel-After deadline (cancelOverdueRuns), queued,
 *   running or suspended alike; the deadline is a column, so a restart loses none.
 * - When the sweep runs (src/engine/sweep-schedule.ts): every `sweepIntervalMs` while runs are queued or due, else
 *   at the next due time a one-statement check saw (deadline, timer, another process's lease running
 *   out, a delayed start), and at least every `idleSweepMs`: an idle process sends one statement per idleSweepMs.
 * - Durability: leases are renewed every TTL/3 for the runs this instance drives. `start()` and the
 *   sweep claim every non-terminal run whose lease expired or was released
 *   (running, admitted-but-not-started, due wait_timer suspensions) and drive it from its last committed
 *   step. A step may run again after a crash, but results are recorded once (fenced on the node having
 *   no result) and a re-executed LLM/HTTP step continues the node's log instead of repeating it.
 * - `stop()`: stops admitting and sweeping, lets drivers reach a durable point (up to `stopTimeoutMs`),
 *   aborts what is left and releases the leases so another instance takes over at once.
 * Nothing polls while idle but the sweep's check; everything else is event driven.
 */

export interface EmbeddedEngineOptions {
  /** Lease owner id; random by default. */
  instanceId?: string;
  /** Lease time-to-live (renewed every TTL/3). Default 15 s. */
  leaseTtlMs?: number;
  /** Period of the recovery/admission/timer sweep while runs are queued or due. Default 1 s. */
  sweepIntervalMs?: number;
  /**
   * Idle, the longest time between two checks of what the sweep would find (src/engine/sweep-schedule.ts): how
   * late a run another process left queued or unleased without a due time may be seen. Default 30 s.
   */
  idleSweepMs?: number;
  /** How long stop() waits for drivers to reach a durable point before aborting them. Default 5 s. */
  stopTimeoutMs?: number;
  /** Runs in flight at once; default config.runCapacity. */
  capacity?: number;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export class EmbeddedEngine implements EnginePort {
  readonly name = 'embedded' as const;
  readonly instanceId: string;
  readonly #deps: RunsDeps;
  readonly #leaseTtlMs: number;
  readonly #holder: LeaseHolder;
  readonly #sweepIntervalMs: number;
  readonly #stopTimeoutMs: number;
  readonly #capacity: number;

  readonly #drivers = new Map<string, Driver>();
  readonly #wakeTimers = new Map<string, NodeJS.Timeout>();
  #state: 'new' | 'running' | 'stopping' | 'stopped' | 'halted' = 'new';
  readonly #schedule: SweepSchedule;
  #renewTimer: NodeJS.Timeout | undefined;
  #sweeping: Promise<void> | null = null;
  /** Stops listening to cancels committed by other processes, and to their run events. */
  #unlistenCancels: (() => void) | null = null;
  #unlistenActivity: (() => void) | null = null;
  readonly #admission: AdmissionPump;

  constructor(deps: RunsDeps, opts: EmbeddedEngineOptions = {}) {
    this.#deps = deps;
    // The process id names the process holding a lease (operators, the scale-out tests).
    this.instanceId = opts.instanceId ?? `embedded-${process.pid}-${randomUUID()}`;
    this.#leaseTtlMs = opts.leaseTtlMs ?? 15_000;
    this.#holder = { owner: this.instanceId, ttlMs: this.#leaseTtlMs };
    this.#sweepIntervalMs = opts.sweepIntervalMs ?? 1_000;
    this.#stopTimeoutMs = opts.stopTimeoutMs ?? 5_000;
    this.#capacity = opts.capacity ?? deps.config.runCapacity;
    this.#admission = new AdmissionPump({
      round: (expireQueued) => admitQueuedRunsDetailed(this.#deps, { capacity: this.#capacity, engine: this.name, lease: this.#holder, expireQueued }),
      admitted: (r) => {
        for (const st of r.states) this.#startDriver(st.runId, st);
      },
      running: () => this.#running,
      failed: (err) => this.#deps.log.error({ err }, 'run admission failed'),
    });
    this.#schedule = new SweepSchedule({
      check: () => sweepDue(this.#deps, this.#holder, this.name),
      sweep: () => this.#sweep(),
      busyMs: this.#sweepIntervalMs,
      idleMs: opts.idleSweepMs ?? 30_000,
      failed: (err) => this.#deps.log.error({ err }, 'engine sweep check failed'),
    });
  }

  get #running(): boolean {
    return this.#state === 'running';
  }

  /** Run ids this instance is driving right now (for tests and diagnostics). */
  activeRuns(): string[] {
    return [...this.#drivers.keys()];
  }

  async start(): Promise<void> {
    if (this.#state === 'running') return;
    if (this.#state !== 'new' && this.#state !== 'stopped') throw new Error(`cannot start an engine that is ${this.#state}`);
    this.#state = 'running';
    // A run this process executes may be cancelled through another process: abort it at once.
    this.#unlistenCancels = this.#deps.bus.onCancel((runId) => void this.runCancelled(runId));
    // Runs in flight in another process: their leases are looked at soon (one may run out, the process gone).
    this.#unlistenActivity = this.#deps.bus.onActivity?.(() => this.#schedule.poke()) ?? null;
    // Runs that passed their deadline while no engine ran are cancelled before anything drives them.
    await this.#cancelOverdue();
    await this.#recover();
    await enterDueRuns(this.#deps, this.name);
    this.#admission.force();
    this.#schedule.start();
    this.#renewTimer = setInterval(() => void this.#renew(), Math.max(50, Math.floor(this.#leaseTtlMs / 3)));
    this.#renewTimer.unref();
  }

  async stop(): Promise<void> {
    if (this.#state !== 'running') return;
    this.#state = 'stopping';
    this.#clearTimers();
    await Promise.allSettled([this.#admission.inFlight, this.#sweeping, this.#schedule.inFlight]);
    for (const d of this.#drivers.values()) {
      d.stopRequested = true;
      d.wake?.();
    }
    const all = () => Promise.allSettled([...this.#drivers.values()].map((d) => d.done));
    await Promise.race([all(), sleep(this.#stopTimeoutMs)]);
    if (this.#drivers.size > 0) {
      for (const d of this.#drivers.values()) d.abort.abort(new DOMException('the engine is stopping', 'AbortError'));
      await Promise.race([all(), sleep(1_000)]);
    }
    const left = [...this.#drivers.keys()];
    if (left.length) {
      await releaseLeases(this.#deps, this.#holder, left).catch((err) => this.#deps.log.warn({ err }, 'could not release run leases'));
    }
    this.#state = 'stopped';
  }

  /**
   * Test hook that simulates `kill -9`: every timer stops, drivers are abandoned mid-flight (their
   * in-flight I/O is aborted) and nothing is released, so the leases must expire before another instance
   * takes the runs over.
   */
  simulateCrash(): void {
    this.#state = 'halted';
    this.#clearTimers();
    for (const d of this.#drivers.values()) {
      d.lost = true;
      d.abort.abort(new DOMException('crashed', 'AbortError'));
      d.wake?.();
    }
  }

  async runAccepted(_runId: string): Promise<void> {
    this.#admission.accepted();
    this.#schedule.poke(); // its deadline, if it has one, is watched from the next check on
  }

  async runCancelled(runId: string): Promise<void> {
    const timer = this.#wakeTimers.get(runId);
    if (timer) clearTimeout(timer);
    this.#wakeTimers.delete(runId);
    const d = this.#drivers.get(runId);
    if (d) {
      d.abort.abort(new DOMException('the run was cancelled', 'AbortError'));
      d.wake?.();
    }
    this.#admission.pump();
    this.#schedule.poke();
  }

  async credentialsSupplied(runId: string): Promise<void> {
    const r = await resumeRun(this.#deps, runId, { reason: 'wait_signal' });
    if (r.status === 'running') await this.#wake(runId);
  }

  async ready(): Promise<boolean> {
    return this.#running;
  }

  // -------------------------------------------------------------------------------------------------
  // Scheduling

  #clearTimers(): void {
    this.#unlistenCancels?.();
    this.#unlistenActivity?.();
    this.#unlistenCancels = this.#unlistenActivity = null;
    this.#schedule.stop();
    clearInterval(this.#renewTimer);
    this.#renewTimer = undefined;
    for (const t of this.#wakeTimers.values()) clearTimeout(t);
    this.#wakeTimers.clear();
  }

  async #sweep(): Promise<void> {
    if (!this.#running || this.#sweeping) return;
    this.#sweeping = (async () => {
      try {
        await this.#cancelOverdue();
        await this.#recover();
        await enterDueRuns(this.#deps, this.name); // delayed starts that have come join the line
        this.#admission.force(); // other processes' runs, queue timeouts, runs that just joined the line
      } catch (err) {
        this.#deps.log.error({ err }, 'engine sweep failed');
      }
    })();
    await this.#sweeping;
    this.#sweeping = null;
  }

  /** Past their Cancel-After deadline: cancelled as the API's cancel does, whatever their state. */
  async #cancelOverdue(): Promise<void> {
    await cancelOverdueRuns(this.#deps, this).catch((err) => this.#deps.log.error({ err }, 'could not cancel runs past their deadline'));
  }

  /** Claims every run nobody drives (lease expired or released) that has something to do now. */
  async #recover(): Promise<void> {
    for (const id of await claimUnleasedRuns(this.#deps, this.#holder, this.name)) this.#startDriver(id, null);
  }

  async #renew(): Promise<void> {
    if (!this.#running) return;
    const ids = [...this.#drivers.keys()];
    if (ids.length === 0) return;
    try {
      const held = await renewLeases(this.#deps, this.#holder, ids);
      for (const id of ids) {
        const d = this.#drivers.get(id);
        if (!d || held.has(id)) continue;
        // Terminal (finishRun clears the lease), parked, or taken over by another instance: stop working on it.
        d.lost = true;
        d.abort.abort(new DOMException('the run lease was lost', 'AbortError'));
        d.wake?.();
      }
    } catch (err) {
      this.#deps.log.warn({ err }, 'could not renew run leases');
    }
  }

  /** A timer is due or credentials arrived: poke the driver, or claim the run and start one. */
  async #wake(runId: string): Promise<void> {
    const d = this.#drivers.get(runId);
    if (d) {
      d.poked = true;
      d.wake?.();
      return;
    }
    if (!this.#running) return;
    if (await claimRun(this.#deps, this.#holder, runId)) this.#startDriver(runId, null);
  }

  #scheduleWake(runId: string, until: number): void {
    const old = this.#wakeTimers.get(runId);
    if (old) clearTimeout(old);
    const t = setTimeout(
      () => {
        this.#wakeTimers.delete(runId);
        void this.#wake(runId).catch((err) => this.#deps.log.error({ err, runId, accountId: knownRunAccount(runId) }, 'could not resume a run'));
      },
      Math.min(MAX_TIMEOUT_MS, Math.max(0, until - Date.now()) + 2),
    );
    t.unref();
    this.#wakeTimers.set(runId, t);
  }

  #startDriver(runId: string, admitted: RunState | null): void {
    const existing = this.#drivers.get(runId);
    if (existing) {
      existing.poked = true;
      existing.wake?.();
      return;
    }
    if (!this.#running) {
      void releaseLeases(this.#deps, this.#holder, [runId]).catch(() => undefined);
      return;
    }
    const d: Driver = {
      runId,
      abort: new AbortController(),
      wake: null,
      poked: false,
      stopRequested: false,
      lost: false,
      admitted,
      done: Promise.resolve(),
    };
    this.#drivers.set(runId, d);
    d.done = this.#drive(d);
  }

  // -------------------------------------------------------------------------------------------------
  // Driving one run

  async #drive(d: Driver): Promise<void> {
    let backoff = 0;
    try {
      for (;;) {
        let outcome: LoopOutcome;
        try {
          outcome = await traceRun(
            () => readRunTraceContext(this.#deps, d.runId),
            d.runId,
            () => this.#runLoop(d),
          );
          backoff = 0;
        } catch (err) {
          if (d.lost || this.#state === 'halted') return;
          this.#deps.log.error({ err, runId: d.runId, accountId: knownRunAccount(d.runId) }, 'run driver failed; retrying');
          backoff = Math.min(5_000, backoff ? backoff * 2 : 200);
          await pauseDriver(d, backoff);
          continue;
        }
        if (outcome.kind === 'park') {
          await releaseLeases(this.#deps, this.#holder, [d.runId]);
          if (d.poked && this.#running) {
            // Credentials or a timer arrived while we were parking: look again.
            d.poked = false;
            if (await claimRun(this.#deps, this.#holder, d.runId)) {
              d.lost = false;
              if (d.abort.signal.aborted) d.abort = new AbortController();
              continue;
            }
          }
          if (outcome.until !== null && this.#running) this.#scheduleWake(d.runId, outcome.until);
          return;
        }
        if (outcome.kind === 'stopped') await releaseLeases(this.#deps, this.#holder, [d.runId]);
        return;
      }
    } catch (err) {
      this.#deps.log.error({ err, runId: d.runId, accountId: knownRunAccount(d.runId) }, 'run driver stopped');
    } finally {
      if (this.#drivers.get(d.runId) === d) this.#drivers.delete(d.runId);
      this.#admission.pump(true);
    }
  }

  async #runLoop(d: Driver): Promise<LoopOutcome> {
    const deps = this.#deps;
    const id = d.runId;
    for (;;) {
      if (d.lost || this.#state === 'halted') return { kind: 'lost' };
      if (d.stopRequested) return { kind: 'stopped' };
      d.poked = false;
      const s = d.admitted ?? (await loadRunState(deps, id));
      d.admitted = null;
      if (!s) return { kind: 'done' };
      const move = nextRunMove(s, Date.now());
      // Credentials that arrived while the step was still deciding to suspend resume the run now.
      if (await performStatusMove(deps, s, move, { resumeCredentials: true })) continue;
      switch (move.kind) {
        case 'end':
          return { kind: 'done' };
        case 'await_admission':
          return { kind: 'park', until: null }; // not admitted (yet)
        case 'park':
          return { kind: 'park', until: move.until };
        case 'await_credentials':
          return { kind: 'park', until: null }; // credentialsSupplied wakes it
        case 'advance': {
          // An admitted run is started by the driver: with its first write, or with its completion.
          const outcome = await this.#advance(d, s);
          if (outcome) return outcome;
        }
      }
    }
  }

  /**
   * Drives a running (or admitted, not yet started) run from its loaded state until it ends, suspends or
   * something needs a fresh look at the database (returns null then).
   */
  async #advance(d: Driver, s: RunState): Promise<LoopOutcome | null> {
    const inflight = new Map<string, Promise<StepDone>>();
    try {
      return await this.#advanceWith(d, s, inflight);
    } catch (error) {
      // Never leave steps running behind a retry: the retry would start them a second time.
      await Promise.allSettled(inflight.values());
      throw error;
    }
  }

  /** The driver decides (src/domain/graph/run-driver.ts); this engine writes, runs the steps and waits. */
  async #advanceWith(d: Driver, s: RunState, inflight: Map<string, Promise<StepDone>>): Promise<LoopOutcome | null> {
    const drv = new RunDriver(s);
    for (;;) {
      const halted = d.lost || this.#state === 'halted';
      const m = drv.next(Date.now(), halted || d.stopRequested || d.abort.signal.aborted);
      const done = await performMove(this.#deps, s, drv, m);
      if (done === 'ended') return { kind: 'done' };
      if (done === 'handled') continue;
      switch (m.kind) {
        case 'execute':
          for (const nodeId of m.steps) inflight.set(nodeId, this.#step(d, nodeId, m.known));
          continue;
        case 'wait': {
          const next = await nextStepDone(d, inflight, m.due === null ? null : Math.max(0, m.due - Date.now()));
          if (!next) continue;
          inflight.delete(next.nodeId);
          const aborted = d.abort.signal.aborted || d.lost;
          drv.stepDone(next.nodeId, 'error' in next ? { error: aborted ? null : next.error } : next.report);
          continue;
        }
        case 'done':
          return { kind: 'done' };
        case 'park':
          return { kind: 'park', until: m.until };
        case 'fail':
          throw m.error;
        default:
          return null;
      }
    }
  }

  #step(d: Driver, nodeId: string, known: StepArgs['known']): Promise<StepDone> {
    return traceStep(d.runId, nodeId, () => executeStep(this.#deps, { runId: d.runId, nodeId, known }, d.abort.signal)).then(
      (report) => ({ nodeId, report }),
      (error: unknown) => ({ nodeId, error }),
    );
  }
}
