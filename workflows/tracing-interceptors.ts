/**
 * The OpenTelemetry workflow interceptors (`@temporalio/interceptors-opentelemetry`), bundled with the
 * workflows (src/engine/temporal/run-worker.ts): the workflow's spans join the trace its start carried
 * in its headers and hand it on to the activities. Always bundled, so the code a workflow replays with
 * does not depend on whether this worker traces; the worker then exports or drops the spans
 * (docs/tracing.md).
 */
export { interceptors } from '@temporalio/interceptors-opentelemetry/lib/workflow-interceptors.js';
