import { randomBytes, randomUUID } from 'node:crypto';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { GraphNode } from '../../src/domain/graph/types.ts';
import { Client, Connection } from '@temporalio/client';
import { TemporalRunClient } from '../../src/engine/temporal/client.ts';
import { CLOSED_BY_TEMPORAL_REASONS } from '../../src/engine/temporal/reconcile-closed.ts';
import { RUN_WORKFLOW_TYPE } from '../../workflows/definitions.ts';
import { cancelRun } from '../../src/runs/cancel-run.ts';
import { WebhookDispatcher } from '../../src/services/webhooks/webhook-dispatcher.ts';
import { testOrm } from '../helpers/db.ts';
import { startWebhookReceiver } from '../helpers/webhook-receiver.ts';
import { eventually, runStatusOf, seedWorkflow, startLiveHarness, startSeededRun } from '../helpers/live-temporal.ts';
import { countTemporal, temporalAddress } from '../helpers/temporal.ts';

/**
 * A workflow terminated in Temporal (the UI's Terminate, `temporal workflow terminate`) while its run
 * waits: the engine's periodic look (src/engine/temporal/reconcile-closed.ts) fails the run with a clear
 * reason, charges only the compute of the step that ran (not the workflow's price), sends its webhook,
 * and frees its RUN_CAPACITY slot for the run queued behind it. A workflow execution timeout is found
 * the same way.
 */

const orm = await testOrm();
const address = temporalAddress('closed by temporal');

const nodes = [
  { id: 'a', kind: 'text.template', template: 'x' },
  { id: 'wait', kind: 'delay', seconds: 120, after: ['a'] },
  { id: 'b', kind: 'text.template', template: 'y', after: ['wait'] },
  { id: 'o', kind: 'output', from: 'b' },
] as GraphNode[];

if (address) {
  test(
    'a run whose workflow is terminated mid-delay ends failed, charged only its steps, with its webhook, and frees its slot',
    countTemporal(async () => {
      const { workflowId, buyer } = await seedWorkflow(orm, nodes, { buyer: `closed-${randomUUID().slice(0, 8)}` });
      const h = await startLiveHarness(orm, address, { RUN_CAPACITY: '1' });
      const receiver = await startWebhookReceiver();
      let dispatcher: WebhookDispatcher | undefined;
      try {
        const em = orm.em.fork();
        const [account] = await em.execute<{ id: string }[]>('select id from accounts where handle = ?', [buyer]);
        await em.execute('insert into webhook_endpoints (id, account_id, url, secret_ciphertext) values (?, ?, ?, ?)', [
          randomUUID(),
          account!.id,
          receiver.url,
          h.deps.sealer.seal(`whsec_${randomBytes(24).toString('base64')}`),
        ]);
        dispatcher = new WebhookDispatcher({ ...h.deps, config: { webhookAllowInsecure: true, allowPrivateNetwork: true } }, { intervalMs: 100 }).start();

        const first = await startSeededRun(h.deps, workflowId);
        await eventually('the first run waiting in its delay', async () => (await runStatusOf(orm, first)) === 'suspended', 60_000);
        const second = await startSeededRun(h.deps, workflowId);
        assert.is(await runStatusOf(orm, second), 'pending', 'queued behind the first: RUN_CAPACITY is 1');

        await h.client.workflow.getHandle(first).terminate('stopped from the Temporal UI');

        await eventually('the terminated run failed', async () => (await runStatusOf(orm, first)) === 'failed', 60_000);
        const [run] = await orm.em
          .fork()
          .execute<{ reason: string; billing_status: string; charge_usd: string; compute_usd: string }[]>(
            'select reason, billing_status, charge_usd, compute_usd from runs where id = ?',
            [first],
          );
        assert.is(run!.reason, CLOSED_BY_TEMPORAL_REASONS.terminated);
        assert.is(run!.billing_status, 'settled');
        assert.ok(Number(run!.compute_usd) > 0, 'the step before the delay ran');
        assert.is(Number(run!.charge_usd), Number(run!.compute_usd), 'charged the compute of the steps that ran, not the price');

        const hooks = await orm.em.fork().execute<{ event_type: string }[]>('select event_type from webhook_deliveries where run_id = ?', [first]);
        assert.equal(
          hooks.map((w) => w.event_type),
          ['run.failed'],
        );
        const delivered = await eventually('the run.failed webhook delivered', async () => receiver.bodies.find((b) => b.includes(first)), 30_000);
        const body = JSON.parse(delivered) as { type: string; data: { id: string; status: string } };
        assert.equal([body.type, body.data.id, body.data.status], ['run.failed', first, 'failed']);

        // The slot is free: the queued run is admitted and reaches its own delay.
        await eventually('the queued run admitted into the freed slot', async () => (await runStatusOf(orm, second)) === 'suspended', 60_000);
        await cancelRun(h.deps, null, second);
      } finally {
        await dispatcher?.stop();
        await receiver.close();
        await h.close();
      }
    }),
  );

  test(
    'a run whose workflow is reset carries on in the new execution: the terminated one behind it does not fail the run',
    countTemporal(async () => {
      const shortWait = nodes.map((n) => (n.id === 'wait' ? ({ ...n, seconds: 6 } as GraphNode) : n));
      const { workflowId } = await seedWorkflow(orm, shortWait, { buyer: `reset-${randomUUID().slice(0, 8)}` });
      const h = await startLiveHarness(orm, address);
      try {
        const runId = await startSeededRun(h.deps, workflowId);
        await eventually('the run waiting in its delay', async () => (await runStatusOf(orm, runId)) === 'suspended', 60_000);
        const handle = h.client.workflow.getHandle(runId);
        // The run is suspended by a local activity inside the workflow task, before that task completes.
        const firstTask = await eventually('the first workflow task completed', async () =>
          ((await handle.fetchHistory()).events ?? []).find((e) => e.workflowTaskCompletedEventAttributes),
        );
        const before = (await handle.describe()).runId;
        await h.client.workflowService.resetWorkflowExecution({
          namespace: 'default',
          workflowExecution: { workflowId: runId, runId: before },
          reason: 'reset from the test',
          workflowTaskFinishEventId: firstTask.eventId,
          requestId: randomUUID(),
        });
        // The reset's terminated execution is listed as closed by Temporal; the run is not failed for it.
        const since = new Date(Date.now() - 60_000);
        await eventually('the terminated execution listed', async () => (await h.engine.client.listClosedByTemporal!(since)).includes(runId), 30_000);
        assert.equal(await h.engine.reconcileClosed(), []);
        await eventually('the run completed by the new execution', async () => (await runStatusOf(orm, runId)) === 'completed', 90_000);
        assert.is.not((await handle.describe()).runId, before, 'a new execution');
      } finally {
        await h.close();
      }
    }),
  );

  test(
    'a timed-out run workflow is listed as closed by Temporal, and its latest execution reads timed_out',
    countTemporal(async () => {
      // A queue no worker polls: the execution can only time out.
      const taskQueue = `closed-${randomUUID()}`;
      const runClient = new TemporalRunClient({ address, namespace: 'default', taskQueue });
      const connection = await Connection.connect({ address });
      try {
        const client = new Client({ connection, namespace: 'default' });
        const runId = randomUUID();
        const since = new Date(Date.now() - 60_000);
        await client.workflow.start(RUN_WORKFLOW_TYPE, { taskQueue, workflowId: runId, args: [{ runId }], workflowExecutionTimeout: '1 second' });
        const listed = await eventually(
          'the timed-out execution listed',
          async () => {
            const ids = await runClient.listClosedByTemporal(since);
            return ids.includes(runId) ? ids : null;
          },
          60_000,
        );
        assert.equal(listed, [runId]);
        assert.is(await runClient.closedByTemporal(runId), 'timed_out');
      } finally {
        await runClient.close();
        await connection.close();
      }
    }),
  );
}

test.run();
