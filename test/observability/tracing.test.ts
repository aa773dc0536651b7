import { trace } from '@opentelemetry/api';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { activeTracer, startTracing, tracingConfigured } from '../../src/observability/tracing.ts';
import { assertRunTrace, one, runTraceArrived, SERVER } from '../helpers/trace-assertions.ts';
import { newTraceparent, startTracedWorld, traceIdOf } from '../helpers/traced-service.ts';

/**
 * OpenTelemetry tracing on the embedded engine (docs/tracing.md), against the real service as a child
 * process and a real OTLP/HTTP receiver: one trace from POST /runs through the run, its steps, the
 * provider call and the HTTP call (both receiving the traceparent) to the webhook delivery.
 */

test('a traceparent on POST /runs continues into the run: request, run, steps, provider and HTTP calls and the webhook are spans of that trace (embedded, http/json)', async () => {
  const w = await startTracedWorld({ OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json' });
  try {
    const tp = newTraceparent();
    const { runId, runStatus } = await w.runToEnd({ traceparent: tp.header, tracestate: 'vendor=abc' });
    assert.is(runStatus, 'completed');
    await w.receiver.waitFor(runTraceArrived(tp.traceId, ['run']));
    const spans = assertRunTrace(w, tp.traceId, runId);
    const request = spans.find((s) => s.name === 'POST /v1/runs')!;
    assert.is(request.parentSpanId, tp.spanId, 'the request span continues the caller’s span');
    const run = one(spans, 'run', (s) => s.name === 'run' && s.attributes['wr.run.id'] === runId);
    assert.is(run.parentSpanId, request.spanId, 'the run continues the context stored with it');
    assert.ok(
      w.receiver.contentTypes.every((t) => t.includes('application/json')),
      w.receiver.contentTypes.join(),
    );
  } finally {
    await w.close();
  }
});

test('without a traceparent the trace starts at the request; http/protobuf (the default) exports it; a GraphQL operation is a span too', async () => {
  const w = await startTracedWorld({});
  try {
    const { runId } = await w.runToEnd();
    await w.receiver.waitFor((spans) => spans.some((s) => s.name === 'POST /v1/runs' && s.attributes['http.response.status_code'] === 202));
    const request = w.receiver.spans.find((s) => s.name === 'POST /v1/runs')!;
    assert.is(request.parentSpanId, '', 'a new trace: the request span is its root');
    await w.receiver.waitFor(runTraceArrived(request.traceId, ['run']));
    assertRunTrace(w, request.traceId, runId);
    assert.ok(w.receiver.contentTypes.length > 0 && w.receiver.contentTypes.every((t) => t.includes('application/x-protobuf')), w.receiver.contentTypes.join());

    const tp = newTraceparent();
    const gql = await fetch(`${w.url}/graphql`, {
      method: 'POST',
      headers: { authorization: `Bearer ${w.internalToken}`, 'content-type': 'application/json', traceparent: tp.header },
      body: JSON.stringify({ query: 'query RecentRuns { runs(limit: 1) { runs { id } } }', operationName: 'RecentRuns' }),
    });
    assert.is(gql.status, 200, await gql.text());
    await w.receiver.waitFor((spans) => spans.some((s) => s.traceId === tp.traceId && s.name === 'query RecentRuns'));
    const op = w.receiver.spans.find((s) => s.traceId === tp.traceId && s.name === 'query RecentRuns')!;
    assert.is(op.attributes['graphql.operation.type'], 'query');
    assert.is(op.attributes['graphql.operation.name'], 'RecentRuns');
    const server = one(w.receiver.spans, 'POST /graphql', (s) => s.traceId === tp.traceId && s.name === 'POST /graphql' && s.kind === SERVER);
    assert.is(op.parentSpanId, server.spanId);
  } finally {
    await w.close();
  }
});

test('after a kill -9 the next process continues the run in the trace stored with it', async () => {
  // Slow provider chunks: the first process is killed while the llm.chat step streams.
  const w = await startTracedWorld({ OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json' }, { stub: { delayMsBetweenChunks: 1_500 } });
  try {
    const tp = newTraceparent();
    const runId = await w.post({ traceparent: tp.header });
    await w.receiver.waitFor((spans) => spans.some((s) => s.traceId === tp.traceId && s.name === 'POST /v1/runs'));
    const until = Date.now() + 30_000;
    while (w.stub.requests.length === 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
    assert.is(w.stub.requests.length, 1, 'the first process called the provider');
    await w.restart();
    assert.is(await w.waitEnd(runId), 'completed');
    await w.receiver.waitFor(runTraceArrived(tp.traceId, ['run']));
    const spans = w.receiver.spans.filter((s) => s.traceId === tp.traceId);
    const request = spans.find((s) => s.name === 'POST /v1/runs')!;
    const runs = spans.filter((s) => s.name === 'run' && s.attributes['wr.run.id'] === runId);
    assert.ok(runs.length >= 1);
    for (const run of runs) assert.is(run.parentSpanId, request.spanId, 'the new process reads the context stored with the run');
    // The second process called the provider again, within the same trace.
    assert.ok(w.stub.requests.length >= 2);
    assert.is(traceIdOf(w.stub.requests.at(-1)!.headers.traceparent), tp.traceId);
  } finally {
    await w.close();
  }
});

test('with no OTEL endpoint no tracing SDK is active: nothing is exported, nothing is sent onward, runs work', async () => {
  // In this process: no endpoint, no SDK (startTracing declines, the global provider stays the no-op one).
  assert.is(tracingConfigured({}), false);
  assert.is(tracingConfigured({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://x', OTEL_SDK_DISABLED: 'true' }), false);
  const silent = { info() {}, warn() {} } as never;
  assert.is(await startTracing(silent, {}), false);
  assert.is(activeTracer(), null);
  assert.is(trace.getTracer('probe').startSpan('probe').isRecording(), false);

  // The service as a process, with a receiver listening but not configured.
  const w = await startTracedWorld({}, { tracing: false });
  try {
    const { runStatus } = await w.runToEnd({ traceparent: newTraceparent().header });
    assert.is(runStatus, 'completed');
    await new Promise((r) => setTimeout(r, 500));
    assert.is(w.receiver.contentTypes.length, 0, 'no export request');
    assert.ok(w.stub.requests.length > 0);
    assert.ok(
      w.stub.requests.every((r) => r.headers.traceparent === undefined),
      'no traceparent to the provider',
    );
    assert.ok(
      w.seen.every((s) => s.headers.traceparent === undefined),
      'no traceparent to the HTTP target or the webhook',
    );
    assert.not.match(w.svc.output(), 'OpenTelemetry tracing on');
    assert.not.match(w.svc.output(), /"level":(50|60)/);
  } finally {
    await w.close();
  }
});

test.run();
