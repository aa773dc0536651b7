import { fork } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Client, Connection } from '@temporalio/client';
import { tsToMs } from '@temporalio/common/lib/time.js';
import { findTemporalCli, startDevServer, type DevServer } from '../src/engine/temporal/dev-server.ts';
import { ServerChild } from './child.ts';
import { httpJson, terminalWaiter } from './load.ts';
import { processCpuMs } from './machine.ts';
import { BENCH_KEY, summarise, WORKFLOW_3, type ProfileSummary, type Row, type StepStats } from './shared.ts';
import { floorWorkflow } from './temporal-floor/workflows.ts';

/**
 * The `temporal` part of `npm run bench`: 3-step template runs end to end on ENGINE=temporal (the service
 * child with its in-process worker, closed loop, POST → terminal) next to the Temporal floor measured in
 * the same run against the same server: a bare workflow with one no-op activity, executed by a plain
 * `@temporalio/client` in a closed loop of the same concurrency, on a bare worker in a child process
 * (bench/temporal-floor/). The dev server is the CLI's, in memory and headless, started here unless
 * TEMPORAL_ADDRESS names one. Activities per run are counted from one run's history.
 */

export type TemporalTarget = { address: string } | { cli: string } | { skip: string };

/** Where the part runs: TEMPORAL_ADDRESS, else a dev server of the CLI found, else skipped (why). */
export function temporalTarget(env: NodeJS.ProcessEnv = process.env): TemporalTarget {
  if (env.TEMPORAL_ADDRESS) return { address: env.TEMPORAL_ADDRESS };
  const cli = findTemporalCli(env);
  if (cli) return { cli };
  return { skip: 'no Temporal CLI found (TEMPORAL_CLI, .venv-temporal/bin/temporal or `temporal` on PATH) and TEMPORAL_ADDRESS not set' };
}

export interface TemporalBenchOptions {
  target: { address: string } | { cli: string };
  namespace: string;
  /** Seconds per measured step, after `warmup` seconds of the same load. */
  duration: number;
  warmup: number;
  /** Closed-loop clients, for the service and the floor alike. */
  users: number;
  /** RUN_CAPACITY of the service child. */
  capacity: number;
  /** Profile the service child (API + worker) over one more window of the same load, after the measured one. */
  profile?: boolean;
  /** A fresh database for the service child. */
  database: () => Promise<{ databaseUrl?: string; dataDir: string }>;
  log: (...a: unknown[]) => void;
}

export interface TemporalBenchResult {
  rows: Row[];
  notes: string[];
  facts: Record<string, number>;
  profile: ServiceProfile | null;
}

type ServiceProfile = { name: string; summary: ProfileSummary; file: string; sql: StepStats['sql'] };

interface LoopResult {
  ids: string[];
  /** Client side, start → result (floor) or POST sent → terminal seen (service), ms. */
  ms: number[];
  seconds: number;
  failed: number;
  /** CPU over the step, % of one core, by process. */
  cpu: Record<string, number>;
  warmupSeconds: number;
  /** Every client finished one execution before the window opened. */
  warmedUp: boolean;
}

/** CPU of the given processes over a step, % of one core. */
function cpuSince(pids: Record<string, number>): () => Record<string, number> {
  const t0 = performance.now();
  const c0 = Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, processCpuMs(pid)]));
  return () => {
    const wall = performance.now() - t0;
    return Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, ((processCpuMs(pid) - c0[k]!) / wall) * 100]));
  };
}

const cpuText = (cpu: Record<string, number>) =>
  Object.entries(cpu)
    .filter(([, v]) => !Number.isNaN(v))
    .map(([k, v]) => `${k} ${v.toFixed(0)} %`)
    .join(', ');

const SEQUENTIAL = 10;

/** `n` executions one after the other: latency without queueing (ms each). */
async function sequential(n: number, one: () => Promise<string>): Promise<number[]> {
  const ms: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await one();
    ms.push(performance.now() - t);
  }
  return ms;
}

export interface HistorySummary {
  activities: number;
  /** Activity types in order of first use, with counts. */
  types: string;
  workflowTasks: number;
  events: number;
  /** The first workflow task was handed to the worker in the start's answer (eager start). */
  eager: boolean;
  /** Where the execution's time went (ms): waiting for `admitted`, tasks queued (scheduled → started) and running (started → completed). */
  split: { total: number; admission: number | null; workflowTaskQueued: number; workflowTaskRunning: number; activityQueued: number; activityRunning: number };
}

/** Activities, workflow tasks and events in one execution's history, and where its time went. */
export async function historyOf(client: Client, workflowId: string): Promise<HistorySummary> {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  const events = history.events ?? [];
  const byType = new Map<string, number>();
  const at = new Map<number, number>();
  const split: HistorySummary['split'] = { total: 0, admission: null, workflowTaskQueued: 0, workflowTaskRunning: 0, activityQueued: 0, activityRunning: 0 };
  const since = (id: unknown, t: number) => t - (at.get(Number(id)) ?? t);
  for (const e of events) {
    const t = tsToMs(e.eventTime);
    at.set(Number(e.eventId), t);
    const name = e.activityTaskScheduledEventAttributes?.activityType?.name;
    if (name) byType.set(name, (byType.get(name) ?? 0) + 1);
    if (e.workflowTaskStartedEventAttributes) split.workflowTaskQueued += since(e.workflowTaskStartedEventAttributes.scheduledEventId, t);
    if (e.workflowTaskCompletedEventAttributes) split.workflowTaskRunning += since(e.workflowTaskCompletedEventAttributes.startedEventId, t);
    if (e.activityTaskStartedEventAttributes) split.activityQueued += since(e.activityTaskStartedEventAttributes.scheduledEventId, t);
    if (e.activityTaskCompletedEventAttributes) split.activityRunning += since(e.activityTaskCompletedEventAttributes.startedEventId, t);
    if (e.workflowExecutionSignaledEventAttributes?.signalName === 'admitted') split.admission = t - tsToMs(events[0]?.eventTime);
  }
  if (events.length) split.total = tsToMs(events[events.length - 1]!.eventTime) - tsToMs(events[0]!.eventTime);
  return {
    activities: [...byType.values()].reduce((a, b) => a + b, 0),
    types: [...byType.entries()].map(([t, n]) => (n > 1 ? `${t} ×${n}` : t)).join(', '),
    workflowTasks: events.filter((e) => e.workflowTaskScheduledEventAttributes).length,
    events: events.length,
    eager: events[0]?.workflowExecutionStartedEventAttributes?.eagerExecutionAccepted === true,
    split,
  };
}

const splitText = (h: HistorySummary) =>
  `${h.split.total.toFixed(0)} ms in all: ${h.split.admission === null ? '' : `admitted signal after ${h.split.admission.toFixed(0)} ms; `}${h.workflowTasks} workflow tasks queued ${h.split.workflowTaskQueued.toFixed(0)} ms, ` +
  `running ${h.split.workflowTaskRunning.toFixed(0)} ms; ${h.activities} activit${h.activities === 1 ? 'y' : 'ies'} queued ${h.split.activityQueued.toFixed(0)} ms, running ${h.split.activityRunning.toFixed(0)} ms`;

export async function temporalBench(opts: TemporalBenchOptions): Promise<TemporalBenchResult> {
  let server: DevServer | null = null;
  if ('cli' in opts.target) {
    opts.log('temporal: starting a dev server (in memory, headless)');
    server = await startDevServer({ cli: opts.target.cli, logLevel: 'error' });
  }
  const address = server?.address ?? (opts.target as { address: string }).address;
  const connection = await Connection.connect({ address });
  const client = new Client({ connection, namespace: opts.namespace });
  const pids: Record<string, number> = { 'load generator': process.pid, ...(server?.child.pid ? { 'Temporal server': server.child.pid } : {}) };
  try {
    const floor = await measureFloor(opts, client, address, pids);
    const service = await measureService(opts, client, address, pids);
    return report(opts, address, server !== null, floor, service);
  } finally {
    await connection.close().catch(() => undefined);
    await server?.stop();
  }
}

// ---------------------------------------------------------------------------------------------------
// The floor

async function measureFloor(opts: TemporalBenchOptions, client: Client, address: string, pids: Record<string, number>) {
  const taskQueue = `bench-floor-${randomBytes(4).toString('hex')}`;
  opts.log(`temporal: floor worker (one no-op activity per workflow) on task queue ${taskQueue}`);
  const worker = await startFloorWorker({ address, namespace: opts.namespace, taskQueue });
  try {
    const one = async () => {
      const id = `bench-floor-${randomUUID()}`;
      await client.workflow.execute(floorWorkflow, { taskQueue, workflowId: id });
      return id;
    };
    const single = await sequential(SEQUENTIAL, one);
    const measured = await executeLoop({ users: opts.users, warmup: opts.warmup, seconds: opts.duration }, one, { ...pids, 'floor worker': worker.pid });
    const history = await historyOf(client, measured.ids[0] ?? (await one()));
    const loaded = measured.ids.length ? await historyOf(client, measured.ids[Math.floor(measured.ids.length / 2)]!) : null;
    opts.log(`temporal floor: ${(measured.ids.length / measured.seconds).toFixed(0)} workflows/s, p50 ${summarise(measured.ms).p50.toFixed(1)} ms`);
    return { ...measured, history, single, loaded };
  } finally {
    await worker.close();
  }
}

/** The floor's bare worker (bench/temporal-floor/worker.ts) in a child process, polling `taskQueue` once this resolves. */
export async function startFloorWorker(opts: { address: string; namespace: string; taskQueue: string }): Promise<{ pid: number; close(): Promise<void> }> {
  const worker = fork(fileURLToPath(new URL('./temporal-floor/worker.ts', import.meta.url)), [], {
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, BENCH_TEMPORAL_FLOOR: JSON.stringify(opts) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
  const close = async () => {
    if (worker.exitCode === null && worker.signalCode === null) worker.send({ cmd: 'close' });
    const timer = setTimeout(() => worker.kill('SIGKILL'), 15_000);
    await exited;
    clearTimeout(timer);
  };
  try {
    await new Promise<void>((resolve, reject) => {
      worker.once('exit', (code) => reject(new Error(`the floor worker exited with code ${code} before it was ready`)));
      worker.once('message', () => resolve());
    });
  } catch (err) {
    await close();
    throw err;
  }
  return { pid: worker.pid!, close };
}

/** The longest a warm-up waits for every client's first execution, and the longest measured window. */
const MAX_WARMUP_S = 60;
const MAX_WINDOW_S = 30;

/**
 * Closed loop: `users` clients, each executing one workflow (or run) after the other. An execution on
 * Temporal takes seconds under this load, so the loop is made steady before it is measured: the clients
 * start spread over the warm-up (not all in one wave that would stay in step), the warm-up lasts at
 * least `warmup` s and until every client has finished one execution, and the window is `seconds` or
 * two warm-up latencies (p50) if that is longer, at most MAX_WINDOW_S. Counted: what completed inside
 * the window, whenever it started.
 */
async function executeLoop(
  opts: { users: number; warmup: number; seconds: number },
  one: () => Promise<string>,
  pids: Record<string, number>,
  onWindow: { start?: () => Promise<unknown>; end?: () => Promise<unknown> } = {},
): Promise<LoopResult> {
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  let from = Infinity;
  let end = Infinity;
  let stopped = false;
  const ids: string[] = [];
  const ms: number[] = [];
  const warmMs: number[] = [];
  let warmedUp = 0;
  let failed = 0;
  const user = async (i: number) => {
    await sleep((i * opts.warmup * 1000) / opts.users);
    let first = true;
    while (!stopped) {
      const sent = performance.now();
      try {
        const id = await one();
        const done = performance.now();
        if (done >= from && done <= end) {
          ids.push(id);
          ms.push(done - sent);
        } else if (done < from) warmMs.push(done - sent);
        if (first) warmedUp++;
        first = false;
      } catch {
        failed++;
        await sleep(50);
      }
    }
  };
  const users = Array.from({ length: opts.users }, (_, i) => user(i));
  const t0 = performance.now();
  await sleep(opts.warmup * 1000);
  while (warmedUp < opts.users && performance.now() - t0 < MAX_WARMUP_S * 1000) await sleep(100);
  const seconds = Math.min(Math.max(opts.seconds, MAX_WINDOW_S), Math.max(opts.seconds, (2 * summarise(warmMs).p50) / 1000 || 0));
  await onWindow.start?.();
  const cpu = cpuSince(pids);
  from = performance.now();
  end = from + seconds * 1000;
  await sleep(seconds * 1000);
  const cpuSplit = cpu();
  await onWindow.end?.();
  stopped = true;
  await Promise.all(users);
  return { ids, ms, seconds, failed, cpu: cpuSplit, warmupSeconds: (from - t0) / 1000, warmedUp: warmedUp >= opts.users };
}

// ---------------------------------------------------------------------------------------------------
// The service on ENGINE=temporal

async function measureService(opts: TemporalBenchOptions, client: Client, address: string, pids: Record<string, number>) {
  const taskQueue = `bench-runs-${randomBytes(4).toString('hex')}`;
  opts.log(`temporal: starting the app (ENGINE=temporal, in-process worker, RUN_CAPACITY=${opts.capacity}) on task queue ${taskQueue}`);
  const db = await opts.database();
  const child = await ServerChild.start({
    engine: 'temporal',
    temporal: { address, taskQueue },
    ...db,
    runCapacity: opts.capacity,
    extraKeys: [],
    extraAccounts: [],
    floor: false,
    track: true,
  });
  try {
    const app = `${child.ready.appUrl}/v1/runs`;
    const waiter = terminalWaiter();
    child.onTerminal = (runs) => waiter.done(runs);
    const submit = () => httpJson('POST', app, { key: BENCH_KEY, body: { workflow: WORKFLOW_3, inputs: { name: 'Ada' } } });
    // A few single runs first: the path works (and the worker's caches are warm) before anything is timed.
    let sample = '';
    for (let i = 0; i < 3; i++) {
      const r = await submit();
      if (r.status !== 202) throw new Error(`POST /runs answered ${r.status}: ${JSON.stringify(r.body)}`);
      sample = String(r.body.run.id);
      const status = await waiter.wait(sample, 60_000);
      if (status !== 'completed') throw new Error(`run ${sample} on Temporal did not complete: ${status}`);
    }
    // The run's end is committed inside the workflow's last task: the history is whole once the workflow closed.
    await client.workflow.getHandle(sample).result();
    const history = await historyOf(client, sample);
    let rejected = 0;
    const statuses: Record<string, number> = {};
    const run = async () => {
      const r = await submit();
      if (r.status !== 202) {
        rejected++;
        throw new Error(`POST /runs answered ${r.status}`);
      }
      const id = String(r.body.run.id);
      const status = await waiter.wait(id, 120_000);
      statuses[status] = (statuses[status] ?? 0) + 1;
      if (status !== 'completed') throw new Error(`run ${id}: ${status}`);
      return id;
    };
    const single = await sequential(SEQUENTIAL, run);
    let stats!: StepStats;
    const r = await executeLoop(
      { users: opts.users, warmup: opts.warmup, seconds: opts.duration },
      run,
      { ...pids, 'service (API + worker)': child.pid },
      {
        start: () => child.call({ cmd: 'stepStart' }),
        end: async () => (stats = await child.call<StepStats>({ cmd: 'stepEnd' })),
      },
    );
    const dbMs: number[] = [];
    for (let i = 0; i < r.ids.length; i += 2000) {
      const part = await child.sql<{ ms: number }>(`select (extract(epoch from completed_at - created_at) * 1000)::float8 as ms from runs where id in (?)`, [
        r.ids.slice(i, i + 2000),
      ]);
      dbMs.push(...part.map((x) => Number(x.ms)));
    }
    const loaded = r.ids.length ? await historyOf(client, r.ids[Math.floor(r.ids.length / 2)]!) : null;
    // How many of the window's runs were started eagerly (a sample spread over the window).
    const sampled = r.ids.filter((_, i) => i % Math.max(1, Math.floor(r.ids.length / 20)) === 0);
    const eager = (await Promise.all(sampled.map((id) => historyOf(client, id)))).filter((h) => h.eager).length;
    opts.log(`temporal service: ${(r.ids.length / r.seconds).toFixed(0)} runs/s, p50 ${summarise(r.ms).p50.toFixed(1)} ms (POST → terminal)`);
    let profile: ServiceProfile | null = null;
    if (opts.profile) {
      // Not in the measured window: the profiler's sampling costs the service CPU.
      await executeLoop(
        { users: opts.users, warmup: 1, seconds: opts.duration },
        run,
        {},
        {
          start: async () => {
            await child.call({ cmd: 'stepStart', countSql: true });
            await child.call({ cmd: 'profileStart' });
          },
          end: async () => {
            const { summary, file } = await child.call<{ summary: ProfileSummary; file: string }>({ cmd: 'profileStop' });
            const { sql } = await child.call<StepStats>({ cmd: 'stepEnd' });
            profile = { name: 'Temporal: 3-step runs on ENGINE=temporal (API + in-process worker, main thread)', summary, file, sql };
          },
        },
      );
    }
    return { ...r, stats, dbMs, history, rejected, statuses, single, loaded, eager: { sampled: sampled.length, eager }, profile };
  } finally {
    await child.close();
  }
}

// ---------------------------------------------------------------------------------------------------
// Report

function report(
  opts: TemporalBenchOptions,
  address: string,
  ownServer: boolean,
  floor: Awaited<ReturnType<typeof measureFloor>>,
  service: Awaited<ReturnType<typeof measureService>>,
): TemporalBenchResult {
  const rate = (n: number, s: number) => n / s;
  const svcRate = rate(service.ids.length, service.seconds);
  const floorRate = rate(floor.ids.length, floor.seconds);
  const svc = summarise(service.ms);
  const fl = summarise(floor.ms);
  const db = summarise(service.dbMs);
  const ratio = floorRate > 0 ? svcRate / floorRate : NaN;
  const fmt = (r: number) => `${r >= 100 ? r.toFixed(0) : r.toFixed(1)}`;
  const rows: Row[] = [
    {
      group: 'Temporal',
      name: `3-step runs on ENGINE=temporal (in-process worker), POST sent → terminal seen (closed loop, RUN_CAPACITY=${opts.capacity})`,
      clients: String(opts.users),
      value: `${fmt(svcRate)} runs/s`,
      p50: svc.p50,
      p99: svc.p99,
      baseline: `floor: workflow with 1 no-op activity, client start → result ${fmt(floorRate)} workflows/s`,
      baseP50: fl.p50,
      baseP99: fl.p99,
      ratio: Number.isNaN(ratio) ? '—' : `${(ratio * 100).toFixed(0)} %`,
      target: '≥ 80 % of floor',
      verdict: ratio >= 0.8 ? 'met' : 'MISS',
    },
    {
      group: 'Temporal',
      name: `single 3-step run on ENGINE=temporal, POST sent → terminal seen (${SEQUENTIAL} sequential)`,
      clients: '1',
      value: `${summarise(service.single).p50.toFixed(1)} ms`,
      p50: summarise(service.single).p50,
      p99: summarise(service.single).max,
      baseline: `floor workflow, start → result (${SEQUENTIAL} sequential)`,
      baseP50: summarise(floor.single).p50,
      baseP99: summarise(floor.single).max,
      ratio: '—',
      target: '—',
      verdict: '',
    },
  ];
  const statuses = Object.entries(service.statuses).filter(([k]) => k !== 'completed');
  const notes = [
    `Temporal closed loops (clients started over ${opts.warmup} s; what completed in the window counts): floor warm-up ${floor.warmupSeconds.toFixed(1)} s, window ${floor.seconds.toFixed(1)} s; ` +
      `service warm-up ${service.warmupSeconds.toFixed(1)} s, window ${service.seconds.toFixed(1)} s${floor.warmedUp && service.warmedUp ? '' : ` (NOT every client finished an execution within the ${MAX_WARMUP_S} s warm-up)`}. ${ownServer ? `Server: the bench's own dev server (Temporal CLI, in memory, headless) on ${address}` : `Server: TEMPORAL_ADDRESS=${address}`}, namespace ${opts.namespace}. ` +
      `Activities per 3-step run (one run's history): ${service.history.activities} (${service.history.types}); workflow tasks ${service.history.workflowTasks}, ` +
      `history events ${service.history.events}; started eagerly: ${service.eager.eager} of ${service.eager.sampled} runs sampled from the window. Sequential runs: p99 column = slowest of ${SEQUENTIAL}. The floor: ${floor.history.activities} activity, ${floor.history.workflowTasks} workflow tasks, ${floor.history.events} events.`,
    `Temporal latency: service accept → completed from the database clock (runs.created_at → completed_at) p50 ${db.p50.toFixed(1)} ms, p99 ${db.p99.toFixed(1)} ms; ` +
      `${(service.stats.sql.statements / Math.max(1, service.ids.length)).toFixed(1)} SQL statements per completed run ` +
      `(acceptance included), service event-loop delay p99 ${service.stats.eventLoopDelay.p99.toFixed(1)} ms.`,
    `Temporal, where one execution's time went (its history; a run from the middle of the window): service ${service.loaded ? splitText(service.loaded) : 'n/a'}; ` +
      `floor ${floor.loaded ? splitText(floor.loaded) : 'n/a'}. Single sequential 3-step run: ${splitText(service.history)}.`,
    `Temporal CPU, % of one core: service step ${cpuText(service.cpu)}; floor step ${cpuText(floor.cpu)}.`,
  ];
  if (statuses.length || service.rejected || service.failed) {
    notes.push(
      `Temporal service: statuses ${JSON.stringify(service.statuses)} (warm-up included), ${service.rejected} submissions refused, ${service.failed} runs not completed.`,
    );
  }
  if (floor.failed) notes.push(`Temporal floor: ${floor.failed} executions failed.`);
  return {
    rows,
    notes,
    profile: service.profile,
    facts: {
      temporal: svcRate,
      temporalFloor: floorRate,
      temporalRatio: ratio,
      temporalP50: svc.p50,
      temporalP99: svc.p99,
      temporalFloorP50: fl.p50,
      temporalFloorP99: fl.p99,
      temporalActivitiesPerRun: service.history.activities,
      temporalWorkflowTasksPerRun: service.history.workflowTasks,
    },
  };
}
