import type { Logger } from '@temporalio/common';
import { bundleWorkflowCode, DefaultLogger, Runtime } from '@temporalio/worker';
import { bundleWorkflows, WORKFLOWS_PATH } from '../../src/engine/temporal/workflow-bundle.ts';

/**
 * Shared by the Temporal test files (one uvu process runs them all): the SDK runtime is installed once,
 * quietly (errors only; the replay tests provoke determinism violations on purpose), and the workflow
 * bundle is built once.
 */

let installed = false;

export function quietTemporalRuntime(): void {
  if (installed) return;
  installed = true;
  try {
    Runtime.install({
      logger: new DefaultLogger('ERROR'),
      telemetryOptions: { logging: { filter: { core: 'ERROR', other: 'ERROR' }, forward: {} } },
    });
  } catch {
    // Already installed by another file of this process: keep that one.
  }
}

let bundle: Promise<{ code: string }> | undefined;

const nothing = () => undefined;
/** For bundles that are expected to fail: webpack's error report is not test output. */
export const silentLogger: Logger = { log: nothing, trace: nothing, debug: nothing, info: nothing, warn: nothing, error: nothing };

export function workflowBundle(workflowsPath = WORKFLOWS_PATH, logger: Logger = new DefaultLogger('ERROR')): Promise<{ code: string }> {
  if (workflowsPath !== WORKFLOWS_PATH) return bundleWorkflowCode({ workflowsPath, logger });
  // The production bundle (with the tracing interceptors), so the replay tests replay what workers run.
  bundle ??= bundleWorkflows();
  return bundle;
}
