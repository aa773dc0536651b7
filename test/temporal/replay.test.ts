import { workerTracingOptions } from '../../src/observability/temporal-tracing.ts';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { countActions } from '../helpers/temporal-actions.ts';
import { bundleWorkflowCode, DefaultLogger, Worker } from '@temporalio/worker';
import { DeterminismViolationError } from '@temporalio/workflow';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { WORKFLOWS_PATH } from '../../src/engine/temporal/workflow-bundle.ts';
import { quietTemporalRuntime, workflowBundle } from './support.ts';

/**
 * Golden replay tests: the histories in test/fixtures/histories/ (recorded from real executions on a dev
 * server by record.ts) are replayed against the bundled workflows/ with Worker.runReplayHistory. Replay
 * re-executes the workflow code and checks every command it issues (activity and local activity types
 * and order, timers, cancellations, completion) against the recorded events. A change to the workflow
 * that alters the command sequence fails these tests (see the negative tests at the end).
 *
 * The sets, all replayed: `activities/`, recorded before the database work became local activities
 * (the `DB_ACTIVITIES_LOCAL` patch; runs started then still replay with activities),
 * `local-activities/`, recorded by the workflow as it is, and `before-canceled-close/`, a deadline run
 * recorded before the `CANCELED_CLOSE` patch (its execution completed; it still replays so).
 */

quietTemporalRuntime();

type History = { events: Record<string, unknown>[] };
const SETS = ['activities', 'local-activities', 'before-canceled-close'] as const;
type FixtureSet = (typeof SETS)[number];
const dir = (set: FixtureSet) => fileURLToPath(new URL(`../fixtures/histories/${set}/`, import.meta.url));
const load = (set: FixtureSet, name: string): History => JSON.parse(readFileSync(`${dir(set)}${name}.json`, 'utf8'));

/** A local activity marker's data (its type and id; the marker records no arguments), or null for any other event. */
function localActivityOf(e: Record<string, unknown>): { activity_type: string } | null {
  const marker = e.markerRecordedEventAttributes as { markerName: string; details: { data: { payloads: { data: string }[] } } } | undefined;
  if (marker?.markerName !== 'core_local_activity') return null;
  return JSON.parse(Buffer.from(marker.details.data.payloads[0]!.data, 'base64').toString('utf8'));
}

/** The activity types a history scheduled, and its local activities' types, each in order. */
function activityTypes(history: History): { scheduled: string[]; local: string[] } {
  return {
    scheduled: history.events.flatMap((e) => {
      const type = (e.activityTaskScheduledEventAttributes as { activityType?: { name: string } } | undefined)?.activityType?.name;
      return type ? [type] : [];
    }),
    local: history.events.flatMap((e) => {
      const la = localActivityOf(e);
      return la ? [la.activity_type] : [];
    }),
  };
}

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
  deadline: 'a Cancel-After deadline during a delay',
};
/** The scenarios both full sets hold (the deadline came after the database work became local). */
const NAMES = Object.keys(SCENARIOS).filter((name) => name !== 'deadline');
/** The scenarios each set holds: those of its time. */
const NAMES_OF: Record<FixtureSet, string[]> = {
  activities: NAMES,
  'local-activities': Object.keys(SCENARIOS),
  'before-canceled-close': ['deadline'],
};

test('each set of committed histories is exactly the scenarios record.ts records', () => {
  for (const set of SETS) {
    const files = readdirSync(dir(set))
      .filter((f) => f.endsWith('.json'))
      .sort();
    assert.equal(files, NAMES_OF[set].map((n) => `${n}.json`).sort(), set);
  }
});

for (const set of SETS) {
  for (const name of NAMES_OF[set]) {
    test(`the history of ${SCENARIOS[name]} recorded with ${set} replays without a determinism violation`, async () => {
      const history = load(set, name);
      const types = history.events.map((e) => String(e.eventType));
      assert.ok(types.at(-1)!.match(/WORKFLOW_EXECUTION_(COMPLETED|CANCELED|FAILED)$/), 'the history runs to the end of the workflow');
      await replay(history, `${set}-${name}`);
    });
  }
}

test('the histories recorded with local activities have no database activity task, those before the patch no local activity', () => {
  for (const name of NAMES) {
    const before = activityTypes(load('activities', name));
    assert.equal(before.local, [], name);
    assert.ok(before.scheduled.includes('advanceRun'), name);
    const after = activityTypes(load('local-activities', name));
    assert.equal(
      after.scheduled.filter((type) => type !== 'executeStep'),
      [],
      name,
    );
    assert.ok(after.local.includes('advanceRun'), name);
  }
});

let captureBundle: Promise<string> | undefined;

test('every activity argument recorded in the golden histories is exactly what the workflow sends', async () => {
  captureBundle ??= bundleWorkflowCode({
    workflowsPath: WORKFLOWS_PATH,
    workflowInterceptorModules: [fileURLToPath(new URL('../fixtures/histories/capture-interceptors.ts', import.meta.url))],
    logger: new DefaultLogger('ERROR'),
  }).then((b) => b.code);
  const code = await captureBundle;
  for (const set of SETS) {
    for (const name of NAMES_OF[set]) {
      const history = load(set, name);
      const sent: [string, unknown[]][] = [];
      const local: string[] = [];
      await Worker.runReplayHistory(
        {
          workflowBundle: { code },
          replayName: `capture-${set}-${name}`,
          sinks: {
            capture: {
              activity: { fn: (_info, type: string, args: unknown[]) => void sent.push([type, args]), callDuringReplay: true },
              localActivity: { fn: (_info, type: string) => void local.push(type), callDuringReplay: true },
            },
          },
        },
        history,
        name,
      );
      const recorded = history.events
        .map((e) => e.activityTaskScheduledEventAttributes as { activityType: { name: string }; input: { payloads: { data: string }[] } } | undefined)
        .filter((a) => a !== undefined)
        .map((a) => [a.activityType.name, a.input.payloads.map((p) => JSON.parse(Buffer.from(p.data, 'base64').toString('utf8')))] as [string, unknown[]]);
      assert.ok(recorded.length + local.length > 0);
      assert.equal(JSON.parse(JSON.stringify(sent)), recorded, `${set}/${name}: the workflow sends the recorded arguments`);
      assert.equal(local, activityTypes(history).local, `${set}/${name}: the workflow runs the recorded local activities`);
    }
  }
});

test('a deadline run recorded before the CANCELED_CLOSE patch completes; since, it asks for its own cancellation and closes Canceled', () => {
  const before = load('before-canceled-close', 'deadline').events;
  const after = load('local-activities', 'deadline').events;
  assert.is(before.at(-1)!.eventType, 'EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED');
  assert.is(after.at(-1)!.eventType, 'EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED');
  assert.ok(
    after.some((e) => e.eventType === 'EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED'),
    'the cancellation request it asked for',
  );
  assert.equal(activityTypes({ events: after }).local.slice(-2), ['cancelRun', 'requestCancellation']);
  assert.not.ok(activityTypes({ events: before }).local.includes('requestCancellation'));
  // The request shares its task's marker action, and a cancellation request is not billed.
  const billed = (events: History['events']) => countActions({ events } as Parameters<typeof countActions>[0]);
  assert.is(billed(after).total, billed(before).total, `${billed(before).billed.join(', ')} → ${billed(after).billed.join(', ')}`);
});

test('an execution whose start carried no trace context makes no workflow spans (the tracing interceptors stay out of it)', async () => {
  const bundle = await workflowBundle();
  const exported: unknown[] = [];
  const sinks = { exporter: { export: { fn: (_info: unknown, spans: unknown[]) => void exported.push(...spans), callDuringReplay: true } } };
  await Worker.runReplayHistory({ workflowBundle: { code: bundle.code }, replayName: 'untraced', sinks }, load('local-activities', 'delay'), 'untraced');
  assert.equal(exported, []);
});

test('each full set of histories covers timers, the signal, every way to close and a parallel step', () => {
  for (const set of ['activities', 'local-activities'] as const) {
    const joined = NAMES.map((name) => JSON.stringify(load(set, name))).join('\n');
    for (const needle of [
      'EVENT_TYPE_TIMER_FIRED',
      'EVENT_TYPE_TIMER_CANCELED',
      '"signalName":"credentialsSupplied"',
      'EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED',
      'EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED',
      'EVENT_TYPE_WORKFLOW_EXECUTION_FAILED',
      'EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED',
    ]) {
      assert.ok(joined.includes(needle), `${set}: ${needle}`);
    }
    const firstSteps = load(set, 'parallel-steps').events.filter(
      (e) => (e.activityTaskScheduledEventAttributes as { workflowTaskCompletedEventId?: string } | undefined)?.workflowTaskCompletedEventId,
    );
    const byTask = new Map<string, number>();
    for (const e of firstSteps) {
      const id = (e.activityTaskScheduledEventAttributes as { workflowTaskCompletedEventId: string }).workflowTaskCompletedEventId;
      byTask.set(id, (byTask.get(id) ?? 0) + 1);
    }
    assert.ok(
      [...byTask.values()].some((n) => n === 2),
      `${set}: two step activities scheduled by one workflow task`,
    );
  }
});

// ---------------------------------------------------------------------------------------------------
// Negative: altered histories and an altered workflow must fail replay.

test('a history with another activity type where the driver ran fails replay with a DeterminismViolationError', async () => {
  const history = load('activities', 'completed');
  const step = history.events.find(
    (e) => (e.activityTaskScheduledEventAttributes as { activityType?: { name: string } } | undefined)?.activityType?.name === 'advanceRun',
  )!;
  (step.activityTaskScheduledEventAttributes as { activityType: { name: string } }).activityType.name = 'completeRun';
  const err = await replayError(history, 'altered-activity');
  assert.instance(err, DeterminismViolationError);
  assert.match(String((err as Error).message), /completeRun/);
});

test('a history with another local activity type where the driver ran fails replay with a DeterminismViolationError', async () => {
  const history = load('local-activities', 'completed');
  const marker = history.events.find((e) => localActivityOf(e)?.activity_type === 'advanceRun')!;
  const payload = (marker.markerRecordedEventAttributes as { details: { data: { payloads: { data: string }[] } } }).details.data.payloads[0]!;
  payload.data = Buffer.from(JSON.stringify({ ...localActivityOf(marker), activity_type: 'completeRun' })).toString('base64');
  const err = await replayError(history, 'altered-local-activity');
  assert.instance(err, DeterminismViolationError);
  assert.match(String((err as Error).message), /completeRun/);
});

/**
 * The history without the events `drop` selects, renumbered the way a server would have numbered it
 * (every `…EventId` reference follows).
 */
function without(history: History, drop: (e: Record<string, unknown>) => boolean): History {
  const kept = history.events.filter((e) => !drop(e));
  const ids = new Map(kept.map((e, i) => [String(e.eventId), String(i + 1)]));
  const renumber = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(renumber);
    if (v === null || typeof v !== 'object') return v;
    return Object.fromEntries(
      Object.entries(v).map(([k, x]) => [k, /EventId$|^eventId$/.test(k) && typeof x === 'string' && ids.has(x) ? ids.get(x) : renumber(x)]),
    );
  };
  return { ...history, events: kept.map((e) => renumber(e) as Record<string, unknown>) };
}

test('a delay history without its durable timer fails replay with a DeterminismViolationError', async () => {
  const history = load('local-activities', 'delay');
  const timers = history.events.filter((e) => String(e.eventType).match(/TIMER_(STARTED|FIRED)$/));
  // The admission wait's timer is started and cancelled; the delay's is started and fired.
  const fired = timers.find((e) => e.eventType === 'EVENT_TYPE_TIMER_FIRED')!;
  const timerId = (fired.timerFiredEventAttributes as { timerId: string }).timerId;
  const altered = without(history, (e) =>
    [e.timerStartedEventAttributes, e.timerFiredEventAttributes].some((a) => (a as { timerId?: string } | undefined)?.timerId === timerId),
  );
  assert.is(altered.events.length, history.events.length - 2);
  const err = await replayError(altered, 'missing-timer');
  assert.instance(err, DeterminismViolationError);
});

test('a history whose workflow ends cancelled where the code completes fails replay', async () => {
  const history = load('local-activities', 'completed');
  const last = history.events.at(-1)!;
  delete last.workflowExecutionCompletedEventAttributes;
  last.eventType = 'EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED';
  last.workflowExecutionCanceledEventAttributes = { workflowTaskCompletedEventId: String(Number(last.eventId) - 1) };
  assert.instance(await replayError(history, 'altered-end'), DeterminismViolationError);
});

test('a workflow changed to issue another command sequence fails to replay the golden histories', async () => {
  const altered = fileURLToPath(new URL('../fixtures/histories/altered-workflow.ts', import.meta.url));
  for (const set of ['activities', 'local-activities'] as const) {
    for (const name of ['completed', 'cancel-during-delay']) {
      const err = await replayError(load(set, name), `altered-code-${set}-${name}`, altered);
      assert.instance(err, DeterminismViolationError, `${set}/${name}`);
    }
  }
});

test.run();
