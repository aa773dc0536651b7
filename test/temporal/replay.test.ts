import { workerTracingOptions } from '../../src/observability/temporal-tracing.ts';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode, DefaultLogger, Worker } from '@temporalio/worker';
import { DeterminismViolationError } from '@temporalio/workflow';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { WORKFLOWS_PATH } from '../../src/engine/temporal/run-worker.ts';
import { quietTemporalRuntime, workflowBundle } from './support.ts';

/**
 * Golden replay tests: the histories in test/fixtures/histories/*.json (recorded from real executions on
 * a dev server by record.ts) are replayed against the bundled workflows/ with Worker.runReplayHistory.
 * Replay re-executes the workflow code and checks every command it issues (activity types and order,
 * timers, cancellations, completion) against the recorded events. A change to the workflow that alters
 * the command sequence fails these tests (see the negative tests at the end).
 */

quietTemporalRuntime();

const DIR = fileURLToPath(new URL('../fixtures/histories/', import.meta.url));
const load = (name: string): { events: Record<string, unknown>[] } => JSON.parse(readFileSync(`${DIR}${name}.json`, 'utf8'));

async function replay(history: unknown, workflowId: string, workflowsPath?: string): Promise<void> {
  const bundle = await workflowBundle(workflowsPath);
  // The worker's sinks too: the bundled tracing interceptors export through one (dropped, tracing is off).
  const { sinks } = await workerTracingOptions();
  await Worker.runReplayHistory({ workflowBundle: { code: bundle.code }, replayName: workflowId, sinks }, history, workflowId);
}

async function replayError(history: unknown, workflowId: string, workflowsPath?: string): Promise<unknown> {
  try {
    await replay(history, workflowId, workflowsPath);
    return null;
  } catch (err) {
    return err;
  }
}

const SCENARIOS: Record<string, string> = {
  completed: 'a completed run (three templates: one activity)',
  delay: 'a delay (timer) run',
  credentials: 'a credentials-signal run',
  'cancel-during-delay': 'a cancellation through the API during a delay',
  failed: 'a failed run (compute limit): the execution fails',
  'node-failure': 'a node failure with completed_with_issues',
  'parallel-steps': 'two LLM steps in parallel',
  'temporal-cancel': 'a Temporal cancellation during a delay',
};
const NAMES = Object.keys(SCENARIOS);

test('the committed histories are exactly the scenarios record.ts records', () => {
  const files = readdirSync(DIR).filter((f) => f.endsWith('.json')).sort();
  assert.equal(files, NAMES.map((n) => `${n}.json`).sort());
});

for (const name of NAMES) {
  test(`the recorded history of ${SCENARIOS[name]} replays without a determinism violation`, async () => {
    const history = load(name);
    const types = history.events.map((e) => String(e.eventType));
    assert.ok(types.at(-1)!.match(/WORKFLOW_EXECUTION_(COMPLETED|CANCELED|FAILED)$/), 'the history runs to the end of the workflow');
    await replay(history, name);
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
  for (const name of NAMES) {
    const history = load(name);
    const sent: [string, unknown[]][] = [];
    await Worker.runReplayHistory(
      {
        workflowBundle: { code },
        replayName: `capture-${name}`,
        sinks: { capture: { activity: { fn: (_info, type: string, args: unknown[]) => void sent.push([type, args]), callDuringReplay: true } } },
      },
      history,
      name,
    );
    const recorded = history.events
      .map((e) => e.activityTaskScheduledEventAttributes as { activityType: { name: string }; input: { payloads: { data: string }[] } } | undefined)
      .filter((a) => a !== undefined)
      .map((a) => [a.activityType.name, a.input.payloads.map((p) => JSON.parse(Buffer.from(p.data, 'base64').toString('utf8')))] as [string, unknown[]]);
    assert.ok(recorded.length > 0);
    assert.equal(JSON.parse(JSON.stringify(sent)), recorded, `${name}: the workflow sends the recorded arguments`);
  }
});

test('the histories cover timers, the signal, every way to close and a parallel step', () => {
  const all = NAMES.map((name) => JSON.stringify(load(name)));
  const joined = all.join('\n');
  for (const needle of ['EVENT_TYPE_TIMER_FIRED', 'EVENT_TYPE_TIMER_CANCELED', '"signalName":"credentialsSupplied"', 'EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED',
    'EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED', 'EVENT_TYPE_WORKFLOW_EXECUTION_FAILED', 'EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED']) {
    assert.ok(joined.includes(needle), needle);
  }
  const failure = load('parallel-steps').events;
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

test('a history with another activity type where the driver ran fails replay with a DeterminismViolationError', async () => {
  const history = load('completed');
  const step = history.events.find(
    (e) => (e.activityTaskScheduledEventAttributes as { activityType?: { name: string } } | undefined)?.activityType?.name === 'advanceRun',
  )!;
  (step.activityTaskScheduledEventAttributes as { activityType: { name: string } }).activityType.name = 'completeRun';
  const err = await replayError(history, 'altered-activity');
  assert.instance(err, DeterminismViolationError);
  assert.match(String((err as Error).message), /completeRun/);
});

/**
 * The history without the events `drop` selects, renumbered the way a server would have numbered it
 * (every `…EventId` reference follows).
 */
function without(history: { events: Record<string, unknown>[] }, drop: (e: Record<string, unknown>) => boolean): { events: Record<string, unknown>[] } {
  const kept = history.events.filter((e) => !drop(e));
  const ids = new Map(kept.map((e, i) => [String(e.eventId), String(i + 1)]));
  const renumber = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(renumber);
    if (v === null || typeof v !== 'object') return v;
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, /EventId$|^eventId$/.test(k) && typeof x === 'string' && ids.has(x) ? ids.get(x) : renumber(x)]));
  };
  return { ...history, events: kept.map((e) => renumber(e) as Record<string, unknown>) };
}

test('a delay history without its durable timer fails replay with a DeterminismViolationError', async () => {
  const history = load('delay');
  const timers = history.events.filter((e) => String(e.eventType).match(/TIMER_(STARTED|FIRED)$/));
  // The admission wait's timer is started and cancelled; the delay's is started and fired.
  const fired = timers.find((e) => e.eventType === 'EVENT_TYPE_TIMER_FIRED')!;
  const timerId = (fired.timerFiredEventAttributes as { timerId: string }).timerId;
  const altered = without(history, (e) => [e.timerStartedEventAttributes, e.timerFiredEventAttributes].some((a) => (a as { timerId?: string } | undefined)?.timerId === timerId));
  assert.is(altered.events.length, history.events.length - 2);
  const err = await replayError(altered, 'missing-timer');
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
