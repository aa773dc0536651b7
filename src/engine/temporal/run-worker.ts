import { fileURLToPath } from 'node:url';
import { type NativeConnection, Worker } from '@temporalio/worker';
import type { ActivityDeps } from '../run-activities.ts';
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
  /** A prebuilt bundle of workflows/ (tests build it once); by default the worker bundles at start. */
  workflowBundle?: { code: string };
}

/** A Temporal worker for the run workflow and its activities, bound to `deps`. Used by `npm run worker` and the engine tests. */
export function createRunWorker(deps: ActivityDeps, opts: RunWorkerOptions): Promise<Worker> {
  return Worker.create({
    connection: opts.connection,
    namespace: opts.namespace,
    taskQueue: opts.taskQueue,
    ...(opts.workflowBundle ? { workflowBundle: opts.workflowBundle } : { workflowsPath: WORKFLOWS_PATH }),
    activities: createActivities(deps, opts.hooks),
    shutdownGraceTime: (opts.shutdownGraceTime ?? '10 seconds') as `${number} seconds`,
  });
}
