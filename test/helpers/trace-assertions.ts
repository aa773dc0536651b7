import * as assert from 'uvu/assert';
import type { ReceivedSpan } from './otlp-receiver.ts';
import { spanIdOf, traceIdOf, type TracedWorld } from './traced-service.ts';

/** What the tracing tests assert about a traced run (test/observability/). */

export const SERVER = 2;
export const CLIENT = 3;

export function one(spans: ReceivedSpan[], what: string, match: (s: ReceivedSpan) => boolean): ReceivedSpan {
  const found = spans.filter(match);
  assert.ok(found.length >= 1, `no ${what} span among:\n${spans.map((s) => `${s.name} ${JSON.stringify(s.attributes)}`).join('\n')}`);
  return found[0]!;
}

/** Everything a traced run must show: the spans of `traceId` and the traceparents sent onward. */
export function assertRunTrace(w: TracedWorld, traceId: string, runId: string): ReceivedSpan[] {
  const spans = w.receiver.spans.filter((s) => s.traceId === traceId);
  for (const s of spans) assert.is(s.service, 'wr-tracing-test', `service.name of ${s.name}`);
  const request = one(spans, 'POST /v1/runs server', (s) => s.name === 'POST /v1/runs' && s.kind === SERVER);
  assert.is(request.attributes['http.route'], '/v1/runs');
  assert.is(request.attributes['http.request.method'], 'POST');
  assert.is(request.attributes['http.response.status_code'], 202);
  for (const [node, kind] of [
    ['say', 'text.template'],
    ['ask', 'llm.chat'],
    ['call', 'http.request'],
  ] as const) {
    const step = one(spans, `step ${node}`, (s) => s.attributes['wr.node.id'] === node && s.name.startsWith('step'));
    assert.is(step.attributes['wr.node.kind'], kind, `kind of step ${node}`);
    assert.is(step.attributes['wr.run.id'], runId);
  }
  const provider = one(spans, 'provider call', (s) => s.name === 'chat gpt-4o-mini' && s.kind === CLIENT);
  assert.is(provider.attributes['gen_ai.system'], 'openai');
  assert.is(provider.attributes['http.response.status_code'], 200);
  const askStep = spans.find((s) => s.attributes['wr.node.id'] === 'ask')!;
  assert.is(provider.parentSpanId, askStep.spanId, 'the provider call is a child of its step');
  // The provider received the provider span's context.
  const sent = w.stub.requests.map((r) => r.headers.traceparent).filter((h) => traceIdOf(h) === traceId);
  assert.is(sent.length, 1, 'the provider stub saw a traceparent of the trace');
  assert.is(spanIdOf(sent[0]), provider.spanId);
  const httpCall = one(spans, 'http.request client', (s) => s.name === 'GET' && s.kind === CLIENT);
  assert.is(httpCall.attributes['url.full'], String(httpCall.attributes['url.full']).split('?')[0], 'no query string recorded');
  const echo = w.seen.find((s) => s.path.startsWith('/echo'));
  assert.is(traceIdOf(echo?.headers.traceparent), traceId, 'the http.request target saw the trace');
  const webhook = one(spans, 'webhook delivery', (s) => s.name === 'webhook run.completed' && s.kind === CLIENT);
  assert.is(webhook.attributes['wr.run.id'], runId);
  assert.is(webhook.attributes['http.response.status_code'], 200);
  const hook = w.seen.find((s) => s.path === '/hook');
  assert.is(traceIdOf(hook?.headers.traceparent), traceId, 'the webhook receiver saw the trace');
  assert.is(spanIdOf(hook?.headers.traceparent), webhook.spanId);
  return spans;
}

/** Waits for the spans a run's trace is complete with (the webhook span is the last to end). */
export function runTraceArrived(traceId: string, extra: string[] = []) {
  return (spans: ReceivedSpan[]) => {
    const names = new Set(spans.filter((s) => s.traceId === traceId).map((s) => s.name));
    return ['POST /v1/runs', 'chat gpt-4o-mini', 'webhook run.completed', 'step http.request', ...extra].every((n) => names.has(n));
  };
}
