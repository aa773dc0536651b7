import { randomUUID } from 'node:crypto';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { GraphNode } from '../../src/domain/graph/types.ts';
import { cancelRun } from '../../src/runs/cancel-run.ts';
import { searchAttributes } from '../../workflows/definitions.ts';
import { testOrm } from '../helpers/db.ts';
import { startProviderStub } from '../helpers/provider-stub.ts';
import { countTemporal, temporalAddress } from '../helpers/temporal.ts';
import { eventually, runStatusOf, seedWorkflow, startLiveHarness, startSeededRun, type LiveHarness, workflowClosed } from '../helpers/live-temporal.ts';

/**
 * What Temporal says about a run once it ended, on a live dev server with the real worker and engine
 * (docs/temporal-operations.md, "How an execution closes"): every failed run's execution fails with
 * the run's buyer-safe reason, a reset execution closes the way its run ended with the search
 * attributes to match, and a terminated one is found by its execution status.
 */

const orm = await testOrm();
const address = temporalAddress('run statuses in Temporal');

const text = (id: string, template: string, extra: Record<string, unknown> = {}) => ({ id, kind: 'text.template', template, ...extra }) as GraphNode;
const out = (id: string, from: string) => ({ id, kind: 'output', from }) as GraphNode;
const delayRun = (seconds: number) => [
  text('a', 'x'),
  { id: 'wait', kind: 'delay', seconds, after: ['a'] } as GraphNode,
  text('b', 'y', { after: ['wait'] }),
  out('o', 'b'),
];
const freshHandle = () => `status-${randomUUID().slice(0, 8)}`;
/** Its only output comes from a json.parse of text that is not JSON: the run fails. */
const PARSE_FAILS = [text('raw', 'not json'), { id: 'parsed', kind: 'json.parse', from: 'raw' } as GraphNode, out('o', 'parsed')];

async function reasonOf(runId: string): Promise<string | null> {
  const [r] = await orm.em.fork().execute<{ reason: string | null }[]>('select reason from runs where id = ?', [runId]);
  return r?.reason ?? null;
}

/** The failure the run's latest execution closed with. */
async function executionFailure(h: LiveHarness, runId: string) {
  const events = (await h.client.workflow.getHandle(runId).fetchHistory()).events ?? [];
  return events.at(-1)?.workflowExecutionFailedEventAttributes?.failure;
}

/** Waits for the run's execution to close; the run failed with a reason of its own, which the execution's failure carries. */
async function failedWithItsReason(h: LiveHarness, runId: string): Promise<void> {
  await workflowClosed(h, runId);
  assert.is(await runStatusOf(orm, runId), 'failed');
  const reason = await reasonOf(runId);
  assert.ok(reason && reason !== 'the run failed', `the run has its own reason: ${reason}`);
  const failure = await executionFailure(h, runId);
  assert.is(failure?.message, reason);
  assert.is(failure?.applicationFailureInfo?.type, 'RunFailed');
}

/** Run ids a visibility query finds (visibility lags a little: polled until `want` is among them). */
async function listed(h: LiveHarness, query: string, want: string): Promise<string[]> {
  return eventually(`${want} in ${query}`, async () => {
    const ids: string[] = [];
    for await (const w of h.client.workflow.list({ query })) ids.push(w.workflowId);
    return ids.includes(want) ? ids : null;
  });
}

/** Resets the run's execution to the end of its first workflow task; answers the new execution's run id. */
async function resetToFirstTask(h: LiveHarness, runId: string): Promise<string> {
  const handle = h.client.workflow.getHandle(runId);
  const firstTask = ((await handle.fetchHistory()).events ?? []).find((e) => e.workflowTaskCompletedEventAttributes)!;
  const { runId: newRunId } = await h.client.workflowService.resetWorkflowExecution({
    namespace: h.deps.config.temporal.namespace,
    workflowExecution: { workflowId: runId, runId: (await handle.describe()).runId },
    reason: 'reset from the test',
    workflowTaskFinishEventId: firstTask.eventId,
    requestId: randomUUID(),
  });
  return newRunId;
}

if (address) {
  test(
    'a run failed by a node computed in memory fails its execution with the reason the API gives',
    countTemporal(async () => {
      const { workflowId, buyer } = await seedWorkflow(orm, PARSE_FAILS, { buyer: freshHandle() });
      const h = await startLiveHarness(orm, address);
      try {
        const runId = await startSeededRun(h.deps, workflowId);
        await failedWithItsReason(h, runId);
        assert.equal(await listed(h, `ExecutionStatus="Failed" AND RunStatus="failed" AND AccountHandle="${buyer}"`, runId), [runId]);
      } finally {
        await h.close();
      }
    }),
  );

  test(
    'a run failed by its I/O step (the provider refuses) fails its execution with the reason the API gives',
    countTemporal(async () => {
      const stub = await startProviderStub({ failWith: 401 });
      try {
        const llm = { id: 'l', kind: 'llm.chat', provider: 'openai', model: 'gpt-4o-mini', prompt: 'x' } as GraphNode;
        const { workflowId } = await seedWorkflow(orm, [llm, out('o', 'l')], { buyer: freshHandle() });
        const h = await startLiveHarness(orm, address, { OPENAI_API_KEY: 'sk-service', OPENAI_BASE_URL: stub.baseURLFor('openai') });
        try {
          await failedWithItsReason(h, await startSeededRun(h.deps, workflowId));
        } finally {
          await h.close();
        }
      } finally {
        await stub.close();
      }
    }),
  );

  /** Runs `nodes` to its end (`drive` takes it there), resets it to its first task, waits for the new execution to close, then `check`s. */
  async function afterReset(
    nodes: GraphNode[],
    check: (h: LiveHarness, r: { runId: string; newRunId: string; buyer: string; status: string }) => Promise<void>,
    drive?: (h: LiveHarness, runId: string) => Promise<void>,
  ): Promise<void> {
    const { workflowId, buyer } = await seedWorkflow(orm, nodes, { buyer: freshHandle() });
    const h = await startLiveHarness(orm, address!);
    try {
      const runId = await startSeededRun(h.deps, workflowId);
      await drive?.(h, runId);
      await workflowClosed(h, runId);
      const newRunId = await resetToFirstTask(h, runId);
      const status = await eventually('the new execution closed', async () => {
        const d = await h.client.workflow.getHandle(runId).describe();
        return d.runId === newRunId && d.status.name !== 'RUNNING' && d.status.name;
      });
      await check(h, { runId, newRunId, buyer, status });
    } finally {
      await h.close();
    }
  }

  test(
    "reset to its first task, a completed run's new execution completes with RunStatus and RunOutcome, a failed one fails with its reason, a cancelled one closes Canceled",
    countTemporal(async () => {
      await afterReset([text('t', 'x'), out('o', 't')], async (h, r) => {
        assert.is(r.status, 'COMPLETED');
        assert.is((await h.client.workflow.getHandle(r.runId).describe()).typedSearchAttributes.get(searchAttributes.runOutcome), 'completed');
        assert.equal(await listed(h, `RunId="${r.newRunId}" AND RunStatus="completed" AND RunOutcome="completed" AND AccountHandle="${r.buyer}"`, r.runId), [
          r.runId,
        ]);
      });
      await afterReset(PARSE_FAILS, async (h, r) => {
        assert.is(r.status, 'FAILED');
        assert.is((await executionFailure(h, r.runId))?.message, await reasonOf(r.runId));
        assert.equal(await listed(h, `RunId="${r.newRunId}" AND ExecutionStatus="Failed" AND RunStatus="failed"`, r.runId), [r.runId]);
      });
      await afterReset(
        delayRun(60),
        async (h, r) => {
          assert.is(r.status, 'CANCELLED');
          assert.equal(await listed(h, `RunId="${r.newRunId}" AND ExecutionStatus="Canceled" AND RunStatus="cancelled"`, r.runId), [r.runId]);
        },
        async (h, runId) => {
          await eventually('the delay run suspended', async () => (await runStatusOf(orm, runId)) === 'suspended');
          await cancelRun(h.deps, null, runId);
        },
      );
    }),
  );

  test(
    'a terminated run is found by ExecutionStatus="Terminated"; its RunStatus stays what it was when terminated (docs/temporal-operations.md)',
    countTemporal(async () => {
      const { workflowId, buyer } = await seedWorkflow(orm, delayRun(120), { buyer: freshHandle() });
      const h = await startLiveHarness(orm, address);
      try {
        const runId = await startSeededRun(h.deps, workflowId);
        await eventually('the delay run suspended', async () => (await runStatusOf(orm, runId)) === 'suspended');
        await listed(h, `RunStatus="suspended" AND AccountHandle="${buyer}"`, runId);
        await h.client.workflow.getHandle(runId).terminate('stopped from the test');
        await eventually('the terminated run failed', async () => (await runStatusOf(orm, runId)) === 'failed', 60_000);
        assert.equal(await listed(h, `ExecutionStatus="Terminated" AND AccountHandle="${buyer}"`, runId), [runId]);
        // Nothing can change a closed execution's search attributes: the open-runs query needs the execution status.
        assert.equal(await listed(h, `ExecutionStatus="Terminated" AND RunStatus="suspended" AND AccountHandle="${buyer}"`, runId), [runId]);
        const open: string[] = [];
        for await (const w of h.client.workflow.list({ query: `ExecutionStatus="Running" AND RunStatus="suspended" AND AccountHandle="${buyer}"` }))
          open.push(w.workflowId);
        assert.equal(open, []);
      } finally {
        await h.close();
      }
    }),
  );
}

test.run();
