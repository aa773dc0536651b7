import { randomUUID } from 'node:crypto';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { countTemporal, temporalAddress } from '../helpers/temporal.ts';
import { assertRunTrace, one, runTraceArrived } from '../helpers/trace-assertions.ts';
import { newTraceparent, startTracedWorld } from '../helpers/traced-service.ts';

/**
 * OpenTelemetry tracing through Temporal (docs/tracing.md): `ENGINE=temporal` with its in-process
 * worker, as a child process against the suite's Temporal dev server. The workflow start carries the
 * run's stored trace context, so the client, workflow and activity spans of
 * @temporalio/interceptors-opentelemetry join the request's trace, and the steps, the provider call and
 * the webhook are spans of it too.
 */

const address = temporalAddress('tracing through Temporal');

if (address) {
  test(
    'a traceparent on POST /runs continues through the Temporal workflow and its activities to the steps, provider call and webhook',
    countTemporal(async () => {
      const w = await startTracedWorld({
        ENGINE: 'temporal',
        TEMPORAL_ADDRESS: address,
        TEMPORAL_TASK_QUEUE: `tracing-${randomUUID()}`,
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
      });
      try {
        const tp = newTraceparent();
        const { runId, runStatus } = await w.runToEnd({ traceparent: tp.header });
        assert.is(runStatus, 'completed');
        // The workflow's own span ends with the workflow, after the activities.
        await w.receiver.waitFor(
          runTraceArrived(tp.traceId, ['StartWorkflow:runWorkflow', 'RunWorkflow:runWorkflow', 'RunActivity:executeStep', 'RunActivity:advanceRun']),
        );
        const spans = assertRunTrace(w, tp.traceId, runId);
        const request = spans.find((s) => s.name === 'POST /v1/runs')!;
        assert.is(request.parentSpanId, tp.spanId);
        // The run's workflow is started (and admitted by signal-with-start) in the context stored with the run.
        const starts = spans.filter((s) => s.name === 'StartWorkflow:runWorkflow' || s.name === 'SignalWithStartWorkflow:runWorkflow');
        assert.ok(spans.some((s) => s.name === 'StartWorkflow:runWorkflow'));
        for (const s of starts) assert.is(s.parentSpanId, request.spanId, `${s.name} continues the context stored with the run`);
        const workflow = one(spans, 'workflow run', (s) => s.name === 'RunWorkflow:runWorkflow');
        assert.ok(
          starts.some((s) => s.spanId === workflow.parentSpanId),
          'the workflow span is a child of its start',
        );
        assert.is(workflow.attributes.workflowId, runId);
        // Each I/O step runs in an executeStep activity whose span is the step's parent.
        const activityIds = new Set(spans.filter((s) => s.name === 'RunActivity:executeStep').map((s) => s.spanId));
        for (const node of ['ask', 'call']) {
          const step = spans.find((s) => s.attributes['wr.node.id'] === node && s.name.startsWith('step'))!;
          assert.ok(activityIds.has(step.parentSpanId), `step ${node} runs inside an executeStep activity span`);
        }
      } finally {
        await w.close();
      }
    }),
  );
}

test.run();
