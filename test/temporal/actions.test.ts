import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { cancelRun } from '../../src/runs/cancel-run.ts';
import { testOrm } from '../helpers/db.ts';
import { countTemporal, temporalAddress } from '../helpers/temporal.ts';
import { countActions, type ActionCount } from '../helpers/temporal-actions.ts';
import { eventually, runStatusOf, seedDemoCatalog, startLiveHarness, startSeededRun, type LiveHarness, workflowClosed } from '../helpers/live-temporal.ts';

/**
 * What each run shape costs in Temporal actions (the unit Temporal Cloud bills), counted from the real
 * history of a demo catalog run (test/helpers/temporal-actions.ts says how): the work a run's shape
 * needs (start, activities, timers, signals), and the RunStatus / RunOutcome upserts, one per status an
 * operator can see change (docs/temporal-operations.md#what-a-run-costs).
 */

const orm = await testOrm();
const address = temporalAddress('action counts');

const GREETING = '00000000-0000-4000-8000-00000000f001';
const HAIKU_BYOK = '00000000-0000-4000-8000-00000000f003';
const PARSE_LATER = '00000000-0000-4000-8000-00000000f004';
const FETCH_PAGE = '00000000-0000-4000-8000-00000000f005';

async function withDemo(fn: (h: LiveHarness) => Promise<void>, env: Record<string, string> = {}): Promise<void> {
  await seedDemoCatalog(orm);
  const h = await startLiveHarness(orm, address!, env);
  try {
    await fn(h);
  } finally {
    await h.close();
  }
}

const runAsDemo = (h: LiveHarness, workflowId: string, inputs: Record<string, unknown> = {}) => startSeededRun(h.deps, workflowId, inputs, 'wr_demo_key');

async function actionsOf(h: LiveHarness, runId: string): Promise<ActionCount> {
  return countActions(await h.client.workflow.getHandle(runId).fetchHistory());
}

function assertCost(actual: ActionCount, work: number, upserts: number): void {
  const what = actual.billed.join(', ');
  assert.is(actual.work, work, `work actions: ${what}`);
  assert.is(actual.upserts, upserts, `status upserts: ${what}`);
}

if (address) {
  /** A run of `workflowId` that runs to completion costs `work` actions and `upserts` status upserts. */
  const completedRunCosts = (name: string, workflowId: string, inputs: Record<string, unknown>, work: number, upserts: number) =>
    test(
      name,
      countTemporal(async () => {
        await withDemo(async (h) => {
          const runId = await runAsDemo(h, workflowId, inputs);
          await workflowClosed(h, runId);
          assert.is(await runStatusOf(orm, runId), 'completed');
          assertCost(await actionsOf(h, runId), work, upserts);
        });
      }),
    );

  completedRunCosts(
    "three templates (f001): the start and one workflow task's markers (the patch, advanceRun), and the end status",
    GREETING,
    { name: 'Ada' },
    2,
    1,
  );
  completedRunCosts('a 5 s delay (f004): start, markers, timer, markers; suspended and the end status', PARSE_LATER, {}, 4, 2);

  test(
    "cancelled mid-delay (f004): start, markers, timer, the cancellation's markers; suspended and cancelled",
    countTemporal(async () => {
      await withDemo(async (h) => {
        const runId = await runAsDemo(h, PARSE_LATER);
        await eventually('suspended', async () => (await runStatusOf(orm, runId)) === 'suspended');
        await cancelRun(h.deps, null, runId);
        await workflowClosed(h, runId);
        assert.is(await runStatusOf(orm, runId), 'cancelled');
        assertCost(await actionsOf(h, runId), 4, 2);
      });
    }),
  );

  test(
    "one http.request (f005): start, the markers of the task that starts the run, the step's activity that records and completes it",
    countTemporal(async () => {
      const page: Server = createServer((_req, res) => res.end('<p>hello</p>'));
      await new Promise<void>((resolve) => page.listen(0, '127.0.0.1', resolve));
      try {
        const url = `http://127.0.0.1:${(page.address() as AddressInfo).port}/`;
        await withDemo(
          async (h) => {
            const runId = await runAsDemo(h, FETCH_PAGE, { url, token: 'secret' });
            await workflowClosed(h, runId);
            assert.is(await runStatusOf(orm, runId), 'completed');
            assertCost(await actionsOf(h, runId), 3, 2);
          },
          { ALLOW_PRIVATE_NETWORK: '1' },
        );
      } finally {
        await new Promise((resolve) => page.close(resolve));
      }
    }),
  );

  test(
    "BYOK until wait_signal (f003): the start and one task's markers, suspended; then no timer while it waits",
    countTemporal(async () => {
      await withDemo(async (h) => {
        const runId = await runAsDemo(h, HAIKU_BYOK, { topic: 'rain' });
        await eventually('suspended', async () => (await runStatusOf(orm, runId)) === 'suspended');
        const handle = h.client.workflow.getHandle(runId);
        await eventually('waiting for credentials', async () => (await handle.query<{ phase: string }>('state')).phase === 'waiting_signal');
        const count = await actionsOf(h, runId);
        assertCost(count, 2, 1);
        assert.not.ok(count.billed.includes('EVENT_TYPE_TIMER_STARTED'), 'no timer while waiting');
        await handle.terminate('test over');
      });
    }),
  );
}

test.run();
