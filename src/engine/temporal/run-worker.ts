import { fileURLToPath } from 'node:url';
import type { LogLevel, LogMetadata } from '@temporalio/common';
import { bundleWorkflowCode, makeTelemetryFilterString, type NativeConnection, Runtime, Worker } from '@temporalio/worker';
import type { Logger } from '../../logger.ts';
import type { RunsDeps } from '../../runs/deps.ts';
import { WORKFLOW_TRACING_INTERCEPTORS, workerTracingOptions } from '../../observability/temporal-tracing.ts';
import { createActivities, type ActivityHooks } from './activities.ts';

/** The workflows module the worker bundles (`workflows/index.ts`). */
export const WORKFLOWS_PATH = fileURLToPath(new URL('../../../workflows/index.ts', import.meta.url));

export interface RunWorkerOptions {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  hooks?: ActivityHooks;
  /** How long running activities get to finish on shutdown before Temporal retries them elsewhere. */
  shutdownGraceTime?: string;
  /** A prebuilt bundle of workflows/; by default the process's one bundle (built on first use). */
  workflowBundle?: { code: string };
}

/** What the bundle is built from: the workflows and the tracing interceptors (always, see docs/tracing.md). */
export const WORKFLOW_BUNDLE_OPTIONS = { workflowsPath: WORKFLOWS_PATH, workflowInterceptorModules: [WORKFLOW_TRACING_INTERCEPTORS] };

let bundle: Promise<{ code: string }> | undefined;

/** workflows/ bundled once per process: every worker of the process (tests start many) shares it. */
export function runWorkflowBundle(): Promise<{ code: string }> {
  bundle ??= bundleWorkflowCode({ ...WORKFLOW_BUNDLE_OPTIONS, logger: quiet }).catch((err: unknown) => {
    bundle = undefined;
    throw err;
  });
  return bundle;
}

const nothing = () => undefined;
const quiet = { log: nothing, trace: nothing, debug: nothing, info: nothing, warn: nothing, error: nothing };

let runtimeInstalled = false;

/**
 * The SDK's runtime logs through the service's logger (JSON lines), warnings and up, instead of its
 * default console output; with `metricsAddress` (TEMPORAL_METRICS_ADDRESS) it also serves the SDK's own
 * metrics (`temporal_*`, seconds, `_total` counters) on http://ADDRESS/metrics. Once per process; a
 * runtime installed earlier (tests) is kept.
 */
export function installTemporalRuntime(log: Logger, metricsAddress?: string): void {
  if (runtimeInstalled) return;
  runtimeInstalled = true;
  const forward = (level: LogLevel, message: string, meta?: LogMetadata) => {
    const method = level === 'ERROR' ? 'error' : level === 'WARN' ? 'warn' : level === 'INFO' ? 'info' : 'debug';
    log[method]({ temporal: meta }, message);
  };
  try {
    Runtime.install({
      logger: {
        log: forward,
        trace: (m, meta) => forward('TRACE', m, meta),
        debug: (m, meta) => forward('DEBUG', m, meta),
        info: (m, meta) => forward('INFO', m, meta),
        warn: (m, meta) => forward('WARN', m, meta),
        error: (m, meta) => forward('ERROR', m, meta),
      },
      telemetryOptions: {
        logging: { filter: makeTelemetryFilterString({ core: 'WARN' }), forward: {} },
        ...(metricsAddress
          ? { metrics: { prometheus: { bindAddress: metricsAddress, countersTotalSuffix: true, unitSuffix: true, useSecondsForDurations: true } } }
          : {}),
      },
    });
  } catch {
    // Already installed in this process: keep that one.
  }
}

/**
 * Workflow-task slots: a run's workflow task holds its slot while the task's local activities run, and
 * an eager start needs a free slot to take its first task, so one per run in flight and some room.
 */
export function workflowTaskSlots(runCapacity: number): number {
  return Math.max(2 * runCapacity + 10, 40);
}

/** A Temporal worker for the run workflow and its activities, bound to `deps`. Used by `npm run worker`, `npm start` and the tests. */
export async function createRunWorker(deps: RunsDeps, opts: RunWorkerOptions): Promise<Worker> {
  return Worker.create({
    connection: opts.connection,
    namespace: opts.namespace,
    taskQueue: opts.taskQueue,
    workflowBundle: opts.workflowBundle ?? (await runWorkflowBundle()),
    activities: createActivities(deps, opts.hooks),
    maxConcurrentWorkflowTaskExecutions: workflowTaskSlots(deps.config.runCapacity),
    ...(await workerTracingOptions()),
    shutdownGraceTime: (opts.shutdownGraceTime ?? '10 seconds') as `${number} seconds`,
  });
}
