import type { WorkflowInterceptors, WorkflowInterceptorsFactory } from '@temporalio/workflow';

/**
 * The OpenTelemetry workflow interceptors (`@temporalio/interceptors-opentelemetry`), bundled with the
 * workflows (src/engine/temporal/run-worker.ts): the workflow's spans join the trace its start carried
 * in its headers and hand it on to the activities. Always bundled, so the code a workflow replays with
 * does not depend on whether this worker traces; the worker then exports or drops the spans
 * (docs/tracing.md).
 *
 * They trace only an execution whose start carried a trace context (the client adds it only while
 * tracing is on). The bundle's modules are evaluated again for every execution (each has its own module
 * cache), so the OpenTelemetry modules are required only then: an untraced run evaluates none of them
 * and makes no tracer, spans or span exports, which together cost more than its own workflow code.
 * Spans are not commands, so tracing or not replays alike.
 */

/** The start header the client's OpenTelemetry interceptor puts the trace context in. */
const TRACE_HEADER = '_tracer-data';

type Interceptor = Record<string, unknown>;
type Call = (input: unknown, next: (input: unknown) => unknown) => unknown;

const INBOUND = ['handleSignal', 'handleUpdate', 'validateUpdate', 'handleQuery'];
const OUTBOUND = [
  'scheduleActivity',
  'scheduleLocalActivity',
  'startNexusOperation',
  'startChildWorkflowExecution',
  'continueAsNew',
  'signalWorkflow',
  'getLogAttributes',
  'getMetricTags',
];

/** Calls that go to the traced interceptor (`pick`) once there is one, else straight on. */
function forward(pick: () => Interceptor | undefined, names: string[]): Interceptor {
  return Object.fromEntries(
    names.map((name) => [
      name,
      (input: unknown, next: (input: unknown) => unknown) => {
        const traced = pick();
        const call = traced?.[name] as Call | undefined;
        return call ? call.call(traced, input, next) : next(input);
      },
    ]),
  );
}

export const interceptors: WorkflowInterceptorsFactory = () => {
  let traced: Required<Pick<WorkflowInterceptors, 'inbound' | 'outbound' | 'internals'>> | undefined;
  const first = (list: 'inbound' | 'outbound' | 'internals') => () => traced?.[list][0] as Interceptor | undefined;
  const inbound = {
    ...forward(first('inbound'), INBOUND),
    execute(input: { headers: Record<string, unknown> }, next: (input: unknown) => unknown) {
      if (!(TRACE_HEADER in input.headers)) return next(input);
      // A plain require, evaluated here and not at the bundle's start (see above). A lib/ path: no public entry
      // holds only the workflow side (the main one loads the client, worker and plugin code too), and this
      // module is the one the package's own plugin bundles with workflows.
      // eslint-disable-next-line @typescript-eslint/no-require-imports, no-restricted-syntax
      const openTelemetry = require('@temporalio/interceptors-opentelemetry/lib/workflow-interceptors.js') as {
        interceptors: () => WorkflowInterceptors;
      };
      traced = openTelemetry.interceptors() as typeof traced;
      return (traced!.inbound[0] as unknown as { execute: Call }).execute(input, next);
    },
  };
  return {
    inbound: [inbound],
    outbound: [forward(first('outbound'), OUTBOUND)],
    internals: [forward(first('internals'), ['dispose'])],
  } as WorkflowInterceptors;
};
