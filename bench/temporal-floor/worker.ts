import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode, DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import type { FloorActivities } from './workflows.ts';

/**
 * The Temporal floor's worker, a child process of the bench (bench/temporal.ts): a bare `Worker` for
 * the floor workflow (bundled here with `bundleWorkflowCode`) and its no-op activity, default worker
 * options like the service's worker. BENCH_TEMPORAL_FLOOR = {"address", "namespace", "taskQueue"}.
 * Sends `ready` over IPC once polling; shuts down on the `close` message.
 */

const opts = JSON.parse(process.env.BENCH_TEMPORAL_FLOOR ?? '{}') as { address: string; namespace: string; taskQueue: string };
const nothing = () => undefined;
const quiet = { log: nothing, trace: nothing, debug: nothing, info: nothing, warn: nothing, error: nothing };

async function main(): Promise<void> {
  Runtime.install({ logger: new DefaultLogger('WARN') });
  const workflowBundle = await bundleWorkflowCode({ workflowsPath: fileURLToPath(new URL('./workflows.ts', import.meta.url)), logger: quiet });
  const connection = await NativeConnection.connect({ address: opts.address });
  const activities: FloorActivities = { noop: async () => undefined };
  const worker = await Worker.create({ connection, namespace: opts.namespace, taskQueue: opts.taskQueue, workflowBundle, activities });
  process.on('message', (m) => {
    if ((m as { cmd?: string }).cmd === 'close' && worker.getState() === 'RUNNING') worker.shutdown();
  });
  const running = worker.run();
  process.send!({ type: 'ready', pid: process.pid });
  await running;
  await connection.close();
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
