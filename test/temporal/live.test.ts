import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { GraphNode } from '../../src/domain/graph/types.ts';
import { cancelRun } from '../../src/runs/cancel-run.ts';
import { startRun } from '../../src/runs/start-run.ts';
import { authenticateKey } from '../../src/services/auth/authenticate-key.ts';
import { testOrm } from '../helpers/db.ts';
import { startProviderStub } from '../helpers/provider-stub.ts';
import { countTemporal, temporalAddress } from '../helpers/temporal.ts';
import { eventually, runStatusOf, seedWorkflow, startLiveHarness, startSeededRun, type LiveHarness, workflowClosed } from '../helpers/live-temporal.ts';

/**
 * The run workflow on a live Temporal server (a dev server started by test/run.ts) with the real worker
 * and engine: what its real history costs, and the search attributes operators filter runs by.
 */

const orm = await testOrm();
const address = temporalAddress('live workflow');

const text = (id: string, template: string, extra: Record<string, unknown> = {}) => ({ id, kind: 'text.template', template, ...extra }) as GraphNode;
const out = (id: string, from: string) => ({ id, kind: 'output', from }) as GraphNode;
/** A fresh account handle per test: visibility outlives the database reset between tests. */
const freshHandle = () => `live-${randomUUID().slice(0, 8)}`;

async function withHarness(fn: (h: LiveHarness) => Promise<void>, env: Record<string, string> = {}): Promise<void> {
  const h = await startLiveHarness(orm, address!, env);
  try {
    await fn(h);
  } finally {
    await h.close();
  }
}

/** Run ids the visibility query finds (the dev server's visibility may lag a little: poll until `want`). */
async function listed(h: LiveHarness, query: string, want: string): Promise<string[]> {
  return eventually(`${want} in ${query}`, async () => {
    const ids: string[] = [];
    for await (const w of h.client.workflow.list({ query })) ids.push(w.workflowId);
    return ids.includes(want) ? ids : null;
  });
}

if (address) {
  test(
    'a three-step template run is one workflow task in its real history: the driver starts, computes and completes it in one local activity',
    countTemporal(async () => {
      const { workflowId } = await seedWorkflow(orm, [
        { id: 'name', kind: 'input.text', required: true } as GraphNode,
        text('t1', 'Hello {{name}}.'),
        text('t2', '{{t1}} {{t1}}'),
        text('t3', '{{t2}} The end.'),
        out('result', 't3'),
      ]);
      await withHarness(async (h) => {
        const runId = await startSeededRun(h.deps, workflowId, { name: 'Ada' });
        await workflowClosed(h, runId);
        assert.is(await runStatusOf(orm, runId), 'completed');
        const events = (await h.client.workflow.getHandle(runId).fetchHistory()).events ?? [];
        assert.not.ok(
          events.some((e) => e.activityTaskScheduledEventAttributes),
          'no activity task',
        );
        assert.is(events.filter((e) => e.workflowTaskScheduledEventAttributes).length, 1, 'one workflow task');
        const markers = events.flatMap((e) => (e.markerRecordedEventAttributes ? [e.markerRecordedEventAttributes.markerName] : []));
        assert.equal(markers, ['core_patch', 'core_local_activity'], 'the patch and advanceRun');
      });
    }),
  );

  test(
    "with the worker in the engine's process, a run starts eagerly: its first workflow task comes with the start's answer",
    countTemporal(async () => {
      const { workflowId } = await seedWorkflow(orm, [text('t', 'x'), out('o', 't')], { buyer: freshHandle() });
      const h = await startLiveHarness(orm, address!, {}, undefined, { inProcessWorker: true });
      try {
        const runId = await startSeededRun(h.deps, workflowId);
        await workflowClosed(h, runId);
        assert.is(await runStatusOf(orm, runId), 'completed');
        const [started, scheduled, taken] = (await h.client.workflow.getHandle(runId).fetchHistory()).events ?? [];
        assert.is(started?.workflowExecutionStartedEventAttributes?.eagerExecutionAccepted, true, 'the server accepted the eager start');
        assert.ok(scheduled?.workflowTaskScheduledEventAttributes && taken?.workflowTaskStartedEventAttributes, 'the first task is taken with the start');
      } finally {
        await h.close();
      }
    }),
  );

  test(
    "a run's workflow carries a summary and details naming the catalog workflow, version and account, and a memo `describe` prints as JSON",
    countTemporal(async () => {
      const { workflowId, buyer } = await seedWorkflow(orm, [text('t', 'x'), out('o', 't')], { buyer: freshHandle() });
      await withHarness(async (h) => {
        const runId = await startSeededRun(h.deps, workflowId);
        await workflowClosed(h, runId);
        const description = await h.client.workflow.getHandle(runId).describe();
        assert.is(await description.staticSummary(), `Live Temporal v1 · ${buyer}`);
        const details = (await description.staticDetails()) ?? '';
        for (const part of [runId, workflowId, buyer, 'v1', `/v1/runs/${runId}`]) assert.ok(details.includes(part), `details name ${part}`);
        assert.equal(description.memo, {
          runId,
          accountHandle: buyer,
          workflowId,
          versionId: description.memo!.versionId,
          workflowName: 'Live Temporal',
          versionLabel: 'v1',
        });
        const cli = process.env.TEMPORAL_CLI;
        if (cli) {
          // The memo's payloads are plain JSON (json/plain): the CLI's JSON output shows them as values.
          const { stdout } = await promisify(execFile)(cli, ['workflow', 'describe', '--address', address!, '--workflow-id', runId, '--output', 'json']);
          const described = JSON.parse(stdout) as { workflowExecutionInfo: { memo: { fields: Record<string, unknown> } } };
          assert.equal(described.workflowExecutionInfo.memo.fields, description.memo);
        }
      });
    }),
  );

  test(
    "a run's workflow carries its priority and concurrency key as Temporal's priorityKey and fairnessKey; a plain run Temporal's default",
    countTemporal(async () => {
      const { workflowId, buyer } = await seedWorkflow(orm, [text('t', 'x'), out('o', 't')], { buyer: freshHandle() });
      await withHarness(async (h) => {
        const principal = await authenticateKey(h.deps, 'Bearer wr_buyer_key');
        const body = { workflow: workflowId, inputs: {}, priority: 'low', concurrencyKey: 'tenant-1' };
        const keyed = (await startRun(h.deps, principal, { body })).run.id;
        const plain = await startSeededRun(h.deps, workflowId);
        for (const id of [keyed, plain]) await workflowClosed(h, id);
        const keyedPriority = (await h.client.workflow.getHandle(keyed).describe()).priority;
        assert.equal(
          { ...keyedPriority },
          { priorityKey: 5, fairnessKey: `${buyer}/tenant-1`, fairnessWeight: 1 },
          'low is priorityKey 5; the account and key are the fairness key',
        );
        assert.is((await h.client.workflow.getHandle(plain).describe()).priority?.priorityKey, 3, "normal is Temporal's default, 3");
      });
    }),
  );

  test(
    'a completed run is found by RunStatus="completed", its account and its outcome',
    countTemporal(async () => {
      const { workflowId, buyer } = await seedWorkflow(orm, [text('t', 'x'), out('o', 't')], { buyer: freshHandle() });
      await withHarness(async (h) => {
        const runId = await startSeededRun(h.deps, workflowId);
        await workflowClosed(h, runId);
        const ids = await listed(h, `RunStatus="completed" AND RunOutcome="completed" AND AccountHandle="${buyer}"`, runId);
        assert.equal(ids, [runId]);
        assert.equal(await listed(h, `CatalogWorkflowId="${workflowId}"`, runId), [runId]);
      });
    }),
  );

  test(
    'a run whose LLM step is streaming is found with RunStatus="running", then with RunStatus="completed"',
    countTemporal(async () => {
      const stub = await startProviderStub({ chunks: Array.from({ length: 12 }, (_, i) => `chunk ${i} `), delayMsBetweenChunks: 400 });
      try {
        const llm = { id: 'l', kind: 'llm.chat', provider: 'openai', model: 'gpt-4o-mini', prompt: 'Talk slowly' } as GraphNode;
        const { workflowId, buyer } = await seedWorkflow(orm, [llm, out('o', 'l')], { buyer: freshHandle() });
        await withHarness(
          async (h) => {
            const runId = await startSeededRun(h.deps, workflowId);
            assert.equal(await listed(h, `RunStatus="running" AND AccountHandle="${buyer}"`, runId), [runId]);
            await workflowClosed(h, runId);
            assert.equal(await listed(h, `RunStatus="completed" AND AccountHandle="${buyer}"`, runId), [runId]);
          },
          { OPENAI_API_KEY: 'sk-service', OPENAI_BASE_URL: stub.baseURLFor('openai') },
        );
      } finally {
        await stub.close();
      }
    }),
  );

  test(
    'a delay run is found with RunStatus="suspended" while it waits, and with RunStatus="cancelled" once cancelled through the API',
    countTemporal(async () => {
      const { workflowId, buyer } = await seedWorkflow(
        orm,
        [text('a', 'x'), { id: 'd', kind: 'delay', seconds: 60, after: ['a'] } as GraphNode, text('b', 'y', { after: ['d'] }), out('o', 'b')],
        {
          buyer: freshHandle(),
        },
      );
      await withHarness(async (h) => {
        const runId = await startSeededRun(h.deps, workflowId);
        assert.equal(await listed(h, `RunStatus="suspended" AND AccountHandle="${buyer}"`, runId), [runId]);
        await cancelRun(h.deps, null, runId);
        await workflowClosed(h, runId);
        assert.is((await h.client.workflow.getHandle(runId).describe()).status.name, 'CANCELLED', 'closed as Canceled, not Completed');
        assert.equal(await listed(h, `RunStatus="cancelled" AND ExecutionStatus="Canceled" AND AccountHandle="${buyer}"`, runId), [runId]);
        const suspended: string[] = [];
        for await (const w of h.client.workflow.list({ query: `RunStatus="suspended" AND AccountHandle="${buyer}"` })) suspended.push(w.workflowId);
        assert.equal(suspended, [], 'no longer listed as suspended');
      });
    }),
  );

  test(
    'a run that waited for credentials past the deadline closes its workflow as Failed, with no timer in its history',
    countTemporal(async () => {
      const llm = { id: 'l', kind: 'llm.chat', provider: 'openai', model: 'gpt-4o-mini', prompt: 'x' } as GraphNode;
      const { workflowId } = await seedWorkflow(orm, [llm, out('o', 'l')], { buyer: freshHandle(), credentialMode: 'byok' });
      await withHarness(
        async (h) => {
          const runId = await startSeededRun(h.deps, workflowId);
          await workflowClosed(h, runId);
          assert.is(await runStatusOf(orm, runId), 'failed');
          const handle = h.client.workflow.getHandle(runId);
          const events = (await handle.fetchHistory()).events ?? [];
          assert.is(events.at(-1)?.workflowExecutionFailedEventAttributes?.failure?.message, 'the run waited too long for credentials');
          assert.not.ok(
            events.some((e) => e.timerStartedEventAttributes),
            'the wait had no timer',
          );
        },
        { CREDENTIALS_WAIT_SECONDS: '1' },
      );
    }),
  );

  test(
    "a failed run closes its workflow as Failed: a non-retryable application failure carrying the run's reason",
    countTemporal(async () => {
      // Three steps at 0.0001 each against a limit of 0.00025: the third would cross it.
      const { workflowId, buyer } = await seedWorkflow(orm, [text('a', 'x'), text('b', '{{a}}'), text('c', '{{b}}'), out('o', 'c')], {
        buyer: freshHandle(),
        computeLimitUsd: '0.000250',
      });
      await withHarness(async (h) => {
        const runId = await startSeededRun(h.deps, workflowId);
        await workflowClosed(h, runId);
        assert.is(await runStatusOf(orm, runId), 'failed');
        const handle = h.client.workflow.getHandle(runId);
        assert.is((await handle.describe()).status.name, 'FAILED');
        const events = (await handle.fetchHistory()).events ?? [];
        const failure = events.at(-1)?.workflowExecutionFailedEventAttributes?.failure;
        assert.is(failure?.message, 'compute limit reached');
        assert.is(failure?.applicationFailureInfo?.type, 'RunFailed');
        assert.is(failure?.applicationFailureInfo?.nonRetryable, true);
        assert.equal(await listed(h, `ExecutionStatus="Failed" AND RunStatus="failed" AND AccountHandle="${buyer}"`, runId), [runId]);
      });
    }),
  );
}

test.run();
