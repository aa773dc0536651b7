import type { WorkflowClientInterceptor } from '@temporalio/client';
import type { InjectedSinks, WorkerInterceptors } from '@temporalio/worker';
import type { ReadableSpan, SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { tracingPipeline } from './tracing.ts';

/**
 * Tracing through Temporal (docs/tracing.md) with `@temporalio/interceptors-opentelemetry`: the client
 * interceptor puts the active trace context (the run's stored one, see src/engine/temporal/client.ts)
 * into the workflow's start headers, the workflow interceptors (bundled, workflows/tracing-interceptors.ts)
 * trace the workflow and hand the context to each activity, and the activity interceptor makes each
 * activity's span the parent of the steps, provider calls and writes it does.
 */

/** The client's workflow interceptors: none when tracing is off. */
export async function clientTracingInterceptors(): Promise<WorkflowClientInterceptor[]> {
  if (!tracingPipeline()) return [];
  const { OpenTelemetryWorkflowClientInterceptor } = await import('@temporalio/interceptors-opentelemetry');
  return [new OpenTelemetryWorkflowClientInterceptor()];
}

/**
 * The worker's activity interceptors and the sink the bundled workflow interceptors export their spans
 * through. With tracing off the sink is still there (the workflow code is the same) and drops them.
 */
export async function workerTracingOptions(): Promise<{ interceptors: WorkerInterceptors; sinks: InjectedSinks<Record<string, never>> }> {
  const pipeline = tracingPipeline();
  if (!pipeline) {
    return { interceptors: {}, sinks: { exporter: { export: { fn: () => undefined } } } as never };
  }
  const otel = await import('@temporalio/interceptors-opentelemetry');
  return {
    interceptors: {
      activity: [
        (ctx) => ({
          inbound: new otel.OpenTelemetryActivityInboundInterceptor(ctx),
          outbound: new otel.OpenTelemetryActivityOutboundInterceptor(ctx),
        }),
      ],
    },
    sinks: { exporter: otel.makeWorkflowExporter(plainAttributes(pipeline.processor), pipeline.resource) } as never,
  };
}

/**
 * The workflow span sink copies the whole workflow info (memo, search attributes, nested objects) into
 * each workflow span's attributes; only its plain values (workflowId, runId, workflowType, taskQueue,
 * attempt, …) are valid span attributes, so the rest is dropped before the spans are exported.
 */
function plainAttributes(processor: SpanProcessor): SpanProcessor {
  return {
    onStart: (span, ctx) => processor.onStart(span, ctx),
    onEnd(span: ReadableSpan) {
      const attributes = span.attributes as Record<string, unknown>;
      for (const [key, value] of Object.entries(attributes)) {
        if (value !== null && typeof value === 'object' && !Array.isArray(value)) delete attributes[key];
      }
      processor.onEnd(span);
    },
    forceFlush: () => processor.forceFlush(),
    shutdown: () => Promise.resolve(), // the SDK shuts the real processor down
  };
}
