import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { Client, Connection } from '@temporalio/client';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { historyOf, startFloorWorker, temporalTarget } from '../../bench/temporal.ts';
import { floorWorkflow } from '../../bench/temporal-floor/workflows.ts';
import { REPO_VENV_CLI } from '../../src/engine/temporal/dev-server.ts';
import { countTemporal, temporalAddress } from '../helpers/temporal.ts';

/** The bench's Temporal part: where it runs, and that its floor is what it claims (one no-op activity). */

test('the Temporal bench runs against TEMPORAL_ADDRESS when it is set, even with a CLI at hand', () => {
  assert.equal(temporalTarget({ TEMPORAL_ADDRESS: '10.0.0.9:7233', TEMPORAL_CLI: process.execPath }), { address: '10.0.0.9:7233' });
});

test('the Temporal bench starts its own dev server with the CLI that TEMPORAL_CLI names', () => {
  assert.equal(temporalTarget({ TEMPORAL_CLI: process.execPath, PATH: '' }), { cli: process.execPath });
});

test('the Temporal bench is skipped, saying why, when there is neither a server address nor a CLI', () => {
  const target = temporalTarget({ TEMPORAL_CLI: '/nonexistent/temporal', PATH: '' });
  assert.ok('skip' in target, JSON.stringify(target));
  assert.match(target.skip, /no Temporal CLI found .* TEMPORAL_ADDRESS not set/);
  // Without TEMPORAL_CLI the repository's venv is looked at before PATH.
  const bare = temporalTarget({ PATH: '' });
  assert.equal(bare, existsSync(REPO_VENV_CLI) ? { cli: REPO_VENV_CLI } : { skip: target.skip });
});

const address = temporalAddress('bench temporal floor');
if (address) {
  test(
    "the Temporal floor's worker child runs the floor workflow, whose history holds exactly one activity, the no-op",
    countTemporal(async () => {
      const taskQueue = `bench-floor-test-${randomBytes(4).toString('hex')}`;
      const worker = await startFloorWorker({ address, namespace: 'default', taskQueue });
      const connection = await Connection.connect({ address });
      try {
        const client = new Client({ connection, namespace: 'default' });
        const id = `bench-floor-test-${randomUUID()}`;
        await client.workflow.execute(floorWorkflow, { taskQueue, workflowId: id, workflowExecutionTimeout: '60 seconds' });
        const history = await historyOf(client, id);
        assert.is(history.activities, 1);
        assert.is(history.types, 'noop');
      } finally {
        await connection.close();
        await worker.close();
      }
    }),
  );
}

test.run();
