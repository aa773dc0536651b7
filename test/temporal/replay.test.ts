import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode, DefaultLogger, Worker } from '@temporalio/worker';
import { DeterminismViolationError } from '@temporalio/workflow';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { SCENARIOS } from '../fixtures/histories/generate.ts';
import { HistoryBuilder } from '../fixtures/histories/history-builder.ts';
import { WORKFLOWS_PATH } from '../../src/engine/temporal/run-worker.ts';
import { quietTemporalRuntime, workflowBundle } from './support.ts';

/**
 * Golden replay tests: the histories in test/fixtures/histories/*.json (scripted by generate.ts, since no
 * Temporal server can run here) are replayed against the bundled workflows/ with Worker.runReplayHistory.
 * Replay re-executes the workflow code and checks every command it issues (activity types and order,
 * timers, cancellations, completion) against the recorded events. A change to the workflow that alters
 * the command sequence fails these tests (see the negative tests at the end).
 */

quietTemporalRuntime();

const DIR = fileURLToPath(new URL('../fixtures/histories/', import.meta.url));
const T0 = Date.parse('2026-11-22T10:00:00.000Z');
const load = (name: string): { events: Record<string, unknown>[] } => JSON.parse(readFileSync(`${DIR}${name}.json`, 'utf8'));

async function replay(history: unknown, workflowId: string, workflowsPath?: string): Promise<void> {
  const bundle = await workflowBundle(workflowsPath);
  await Worker.runReplayHistory({ workflowBundle: { code: bundle.code }, replayName: workflowId }, history, workflowId);
}

async function replayError(history: unknown, workflowId: string, workflowsPath?: string): Promise<unknown> {
  try {
    await replay(history, workflowId, workflowsPath);
    return null;
  } catch (err) {
    return err;
  }
}

test('every committed history is exactly what generate.ts scripts (regenerate after a deliberate change)', () => {
  const files = readdirSync(DIR).filter((f) => f.endsWith('.json')).sort();
  assert.equal(files, SCENARIOS.map((s) => `${s.name}.json`).sort());
  for (const s of SCENARIOS) {
    const h = new HistoryBuilder(T0);
    s.build(h);
    assert.equal(load(s.name), h.toJSON(), `${s.name}.json is up to date`);
  }
});

const required: Record<string, string> = {
  completed: 'a completed run',
  delay: 'a delay (timer) run',
  credentials: 'a credentials-signal run',
  'cancel-during-delay': 'a cancel signal during a delay',
  'node-failure': 'a node failure with completed_with_issues',
  'temporal-cancel': 'a Temporal cancellation during a delay',
};

for (const s of SCENARIOS) {
  test(`the history of ${required[s.name] ?? s.description} replays without a determinism violation`, async () => {
    const history = load(s.name);
    const types = history.events.map((e) => String(e.eventType));
    assert.ok(types.at(-1)!.match(/WORKFLOW_EXECUTION_(COMPLETED|CANCELED)$/), 'the history runs to the end of the workflow');
    await replay(history, s.runId);
  });
}

let captureBundle: Promise<string> | undefined;

test('every activity argument recorded in the golden histories is exactly what the workflow sends', async () => {
  captureBundle ??= bundleWorkflowCode({
    workflowsPath: WORKFLOWS_PATH,
    workflowInterceptorModules: [fileURLToPath(new URL('../fixtures/histories/capture-interceptors.ts', import.meta.url))],
    logger: new DefaultLogger('ERROR'),
  }).then((b) => b.code);
  const code = await captureBundle;
  for (const s of SCENARIOS) {
    const history = load(s.name);
    const sent: [string, unknown[]][] = [];
    await Worker.runReplayHistory(
      {
        workflowBundle: { code },
        replayName: `capture-${s.name}`,
        sinks: { capture: { activity: { fn: (_info, type: string, args: unknown[]) => void sent.push([type, args]), callDuringReplay: true } } },
      },
      history,
      s.runId,
    );
    const recorded = history.events
      .map((e) => e.activityTaskScheduledEventAttributes as { activityType: { name: string }; input: { payloads: { data: string }[] } } | undefined)
      .filter((a) => a !== undefined)
      .map((a) => [a.activityType.name, a.input.payloads.map((p) => JSON.parse(Buffer.from(p.data, 'base64').toString('utf8')))] as [string, unknown[]]);
    assert.ok(recorded.length > 0);
    assert.equal(JSON.parse(JSON.stringify(sent)), recorded, `${s.name}: the workflow sends the recorded arguments`);
  }
});

test('the histories cover timers, every signal and a parallel step', () => {
  const all = SCENARIOS.map((s) => JSON.stringify(load(s.name)));
  const joined = all.join('\n');
  for (const needle of ['EVENT_TYPE_TIMER_FIRED', 'EVENT_TYPE_TIMER_CANCELED', '"signalName":"admitted"', '"signalName":"credentialsSupplied"', '"signalName":"cancel"', 'EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED']) {
    assert.ok(joined.includes(needle), needle);
  }
  const failure = load('node-failure').events;
  const firstSteps = failure.filter((e) => (e.activityTaskScheduledEventAttributes as { workflowTaskCompletedEventId?: string } | undefined)?.workflowTaskCompletedEventId);
  const byTask = new Map<string, number>();
  for (const e of firstSteps) {
    const id = (e.activityTaskScheduledEventAttributes as { workflowTaskCompletedEventId: string }).workflowTaskCompletedEventId;
    byTask.set(id, (byTask.get(id) ?? 0) + 1);
  }
  assert.ok([...byTask.values()].some((n) => n === 2), 'two step activities scheduled by one workflow task');
});

// ---------------------------------------------------------------------------------------------------
// Negative: altered histories and an altered workflow must fail replay.

test('a history with another activity type where a step ran fails replay with a DeterminismViolationError', async () => {
  const history = load('completed');
  const step = history.events.find(
    (e) => (e.activityTaskScheduledEventAttributes as { activityType?: { name: string } } | undefined)?.activityType?.name === 'executeStep',
  )!;
  (step.activityTaskScheduledEventAttributes as { activityType: { name: string } }).activityType.name = 'applyActions';
  const err = await replayError(history, 'altered-activity');
  assert.instance(err, DeterminismViolationError);
  assert.match(String((err as Error).message), /applyActions/);
});

test('a delay history without its timer fails replay with a DeterminismViolationError', async () => {
  // The delay scenario, but resumed right after the suspension: no durable timer in between.
  const h = new HistoryBuilder(T0);
  const runId = SCENARIOS.find((s) => s.name === 'delay')!.runId;
  const graph = {
    nodes: [
      { id: 'a', kind: 'text.template', template: 'before' },
      { id: 'wait', kind: 'delay', seconds: 2, after: ['a'] },
      { id: 'b', kind: 'text.template', template: 'after', after: ['wait'] },
      { id: 'o', kind: 'output', from: 'b' },
    ],
  };
  const state = { runId, accountId: 'x', versionId: 'y', status: 'running', phase: null, suspendReason: null, resumeAt: null, credentialMode: 'service_hosted', graph, inputs: {}, progress: { results: {}, timers: {} }, computeUsd: '0', computeLimitUsd: '5', stepUsd: '0.0001', stepsExecuted: 0, lastSequence: 3 };
  h.started('runWorkflow', [{ runId, admitted: true }]);
  let w = h.workflowTask([{ activity: 'prepareRun', args: [runId] }]);
  h.activityCompleted(w.activities[0]!, { status: 'running', started: true, state });
  w = h.workflowTask([{ activity: 'executeStep', args: [{ runId, nodeId: 'a' }] }]);
  h.activityCompleted(w.activities[0]!, { type: 'recorded', result: { status: 'completed', value: 'before' } });
  const dueAt = h.t + 2_000;
  w = h.workflowTask([{ activity: 'applyActions', args: [runId, [{ type: 'start_timer', nodeId: 'wait', dueAt }]] }]);
  h.activityCompleted(w.activities[0]!, { applied: true, status: null });
  w = h.workflowTask([{ activity: 'suspendRun', args: [runId, { reason: 'wait_timer', resumeAt: dueAt }] }]);
  h.activityCompleted(w.activities[0]!, { changed: true, status: 'suspended' });
  // Still before the due time: the workflow must start a timer here, the history says resumeRun.
  w = h.workflowTask([{ activity: 'resumeRun', args: [runId, 'wait_timer'] }]);
  h.activityCompleted(w.activities[0]!, { changed: true, status: 'running' });
  const err = await replayError(h.toJSON(), 'missing-timer');
  assert.instance(err, DeterminismViolationError);
});

test('a history whose workflow ends cancelled where the code completes fails replay', async () => {
  const history = load('completed');
  const last = history.events.at(-1)!;
  delete last.workflowExecutionCompletedEventAttributes;
  last.eventType = 'EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED';
  last.workflowExecutionCanceledEventAttributes = { workflowTaskCompletedEventId: String(Number(last.eventId) - 1) };
  assert.instance(await replayError(history, 'altered-end'), DeterminismViolationError);
});

test('a workflow changed to issue another command sequence fails to replay the golden histories', async () => {
  const altered = fileURLToPath(new URL('../fixtures/histories/altered-workflow.ts', import.meta.url));
  for (const name of ['completed', 'cancel-during-delay']) {
    const err = await replayError(load(name), `altered-code-${name}`, altered);
    assert.instance(err, DeterminismViolationError, name);
  }
});

test.run();
