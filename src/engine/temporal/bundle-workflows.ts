import { bundleWorkflowCode } from '@temporalio/worker';
import { WORKFLOW_BUNDLE_OPTIONS } from './workflow-bundle-options.ts';

/**
 * Run as a child process by runWorkflowBundle (run-worker.ts): bundles workflows/ and writes the code
 * to stdout. Webpack's compilation (its modules, the sources it reads, the memory it peaks at) ends
 * with this process instead of staying in the service's.
 */

const nothing = () => undefined;
const quiet = { log: nothing, trace: nothing, debug: nothing, info: nothing, warn: nothing, error: nothing };

const { code } = await bundleWorkflowCode({ ...WORKFLOW_BUNDLE_OPTIONS, logger: quiet });
process.stdout.write(code);
