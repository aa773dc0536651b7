import type { IncomingMessage, ServerResponse } from 'node:http';
import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Span } from '@opentelemetry/api';
import {
  ATTR_CLIENT_ADDRESS,
  ATTR_ERROR_TYPE,
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_HTTP_ROUTE,
  ATTR_NETWORK_PROTOCOL_VERSION,
  ATTR_SERVER_ADDRESS,
  ATTR_SERVER_PORT,
  ATTR_URL_FULL,
  ATTR_URL_PATH,
  ATTR_URL_SCHEME,
  ATTR_USER_AGENT_ORIGINAL,
} from '@opentelemetry/semantic-conventions';
import { activeTracer, contextFromCarrier } from './tracing.ts';

/**
 * The spans of this service (docs/tracing.md). Each helper starts with `activeTracer()`: with tracing
 * off it calls straight through and allocates nothing.
 *
 * Attribute names follow the OpenTelemetry semantic conventions (HTTP server and client spans; the
 * GenAI ones for provider calls); this service's own are under `wr.` (run, node, webhook delivery).
 */

/** GenAI attributes (incubating conventions, written out so a convention release cannot move them). */
const GEN_AI_OPERATION_NAME = 'gen_ai.operation.name';
const GEN_AI_SYSTEM = 'gen_ai.system';
const GEN_AI_REQUEST_MODEL = 'gen_ai.request.model';

const KNOWN_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'CONNECT', 'TRACE']);

function methodOf(raw: string | undefined): string {
  const m = (raw ?? 'GET').toUpperCase();
  return KNOWN_METHODS.has(m) ? m : '_OTHER';
}

function failSpan(span: Span, err: unknown): void {
  span.recordException(err instanceof Error ? err : String(err));
  span.setStatus({ code: SpanStatusCode.ERROR });
  span.setAttribute(ATTR_ERROR_TYPE, err instanceof Error ? err.name : 'Error');
}

/** Runs `fn` as the span's active scope; errors mark the span, which always ends. */
async function within<T>(span: Span, parent: ReturnType<typeof context.active>, fn: () => Promise<T>): Promise<T> {
  try {
    return await context.with(trace.setSpan(parent, span), fn);
  } catch (err) {
    failSpan(span, err);
    throw err;
  } finally {
    span.end();
  }
}

// -------------------------------------------------------------------------------------------------
// HTTP server

/**
 * The HTTP server span of one request: continues a W3C `traceparent` / `tracestate` the caller sent,
 * else starts a trace. Named by the method until the route is known (`traceRoute`), ends when the
 * response is finished or the connection closes (SSE streams last as long as the stream).
 */
export function traceRequest<T>(req: IncomingMessage, res: ServerResponse, path: string, fn: () => Promise<T>): Promise<T> {
  const tracer = activeTracer();
  if (!tracer) return fn();
  const parent = propagation.extract(ROOT_CONTEXT, req.headers);
  const method = methodOf(req.method);
  const attributes: Attributes = {
    [ATTR_HTTP_REQUEST_METHOD]: method,
    [ATTR_URL_PATH]: path,
    [ATTR_URL_SCHEME]: 'http',
    [ATTR_NETWORK_PROTOCOL_VERSION]: req.httpVersion,
  };
  const agent = req.headers['user-agent'];
  if (agent) attributes[ATTR_USER_AGENT_ORIGINAL] = agent;
  if (req.socket.remoteAddress) attributes[ATTR_CLIENT_ADDRESS] = req.socket.remoteAddress;
  if (req.socket.localPort) attributes[ATTR_SERVER_PORT] = req.socket.localPort;
  const span = tracer.startSpan(method, { kind: SpanKind.SERVER, attributes }, parent);
  let ended = false;
  const end = () => {
    if (ended) return;
    ended = true;
    span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, res.statusCode);
    if (res.statusCode >= 500) {
      span.setStatus({ code: SpanStatusCode.ERROR });
      span.setAttribute(ATTR_ERROR_TYPE, String(res.statusCode));
    }
    span.end();
  };
  res.once('finish', end);
  res.once('close', end);
  return context.with(trace.setSpan(parent, span), fn);
}

/** Names the active request span by its route template (`POST /v1/runs`) once the router matched it. */
export function traceRoute(method: string | undefined, template: string): void {
  if (!activeTracer()) return;
  const span = trace.getActiveSpan();
  if (!span) return;
  span.updateName(`${methodOf(method)} ${template}`);
  span.setAttribute(ATTR_HTTP_ROUTE, template);
}

// -------------------------------------------------------------------------------------------------
// Runs and steps

/**
 * A span for one stretch of a run's execution in this process (the embedded engine drives a run from a
 * claim until it ends, parks or is handed over), a child of the trace context stored with the run, so
 * the run continues the trace of the request that started it — in any process, after any restart.
 * `storedContext` reads that context; it is called only with tracing on.
 */
export async function traceRun<T>(storedContext: () => Promise<unknown>, runId: string, fn: () => Promise<T>): Promise<T> {
  const tracer = activeTracer();
  if (!tracer) return fn();
  const parent = contextFromCarrier(await storedContext());
  const span = tracer.startSpan('run', { attributes: { 'wr.run.id': runId } }, parent);
  return within(span, parent, fn);
}

/** A span for one step of a run (an I/O step, or an in-memory one run through `executeStep`). */
export function traceStep<T>(runId: string, nodeId: string, fn: () => Promise<T>): Promise<T> {
  const tracer = activeTracer();
  if (!tracer) return fn();
  const parent = context.active();
  const span = tracer.startSpan('step', { attributes: { 'wr.run.id': runId, 'wr.node.id': nodeId } }, parent);
  return within(span, parent, fn);
}

/** A span for an in-memory step the run driver computes (text.template, json.parse): no I/O. */
export function traceComputedStep<T>(runId: string, node: { id: string; kind: string }, fn: () => T): T {
  const tracer = activeTracer();
  if (!tracer) return fn();
  const span = tracer.startSpan(`step ${node.kind}`, { attributes: { 'wr.run.id': runId, 'wr.node.id': node.id, 'wr.node.kind': node.kind } });
  try {
    return fn();
  } catch (err) {
    failSpan(span, err);
    throw err;
  } finally {
    span.end();
  }
}

/** Names the active step span by the node's kind, once the step knows it (the node executors call it). */
export function traceStepKind(kind: string): void {
  if (!activeTracer()) return;
  const span = trace.getActiveSpan();
  if (!span) return;
  span.updateName(`step ${kind}`);
  span.setAttribute('wr.node.kind', kind);
}

// -------------------------------------------------------------------------------------------------
// Outgoing HTTP

/**
 * `fetch` with an HTTP client span and the span's `traceparent` sent onward; the global fetch itself
 * when tracing is off. `name` / `attributes` describe what the call is (a provider call is named
 * `chat {model}` with the GenAI attributes). The span ends when the response headers arrive. The URL is
 * recorded without its query string, which may carry a caller's secret.
 */
export function tracedFetch(opts: { name?: string; attributes?: Attributes } = {}): typeof fetch {
  const tracer = activeTracer();
  if (!tracer) return fetch;
  return async (input: string | URL | Request, init?: RequestInit) => {
    const request = input instanceof Request ? input : null;
    const url = new URL(request ? request.url : String(input));
    const method = methodOf(init?.method ?? request?.method ?? 'GET');
    const attributes: Attributes = {
      [ATTR_HTTP_REQUEST_METHOD]: method,
      [ATTR_URL_FULL]: `${url.origin}${url.pathname}`,
      [ATTR_SERVER_ADDRESS]: url.hostname,
      [ATTR_SERVER_PORT]: Number(url.port) || (url.protocol === 'https:' ? 443 : 80),
      ...opts.attributes,
    };
    const parent = context.active();
    const span = tracer.startSpan(opts.name ?? method, { kind: SpanKind.CLIENT, attributes }, parent);
    const headers = new Headers(init?.headers ?? request?.headers);
    propagation.inject(trace.setSpan(parent, span), headers, { set: (h, k, v) => h.set(k, v) });
    try {
      const res = await fetch(input, { ...init, headers });
      span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, res.status);
      if (res.status >= 400) {
        span.setStatus({ code: SpanStatusCode.ERROR });
        span.setAttribute(ATTR_ERROR_TYPE, String(res.status));
      }
      return res;
    } catch (err) {
      failSpan(span, err);
      throw err;
    } finally {
      span.end();
    }
  };
}

/** The fetch a provider's SDK client gets: undefined (the SDK's own default) when tracing is off. */
export function providerFetch(provider: string, model: string): typeof fetch | undefined {
  if (!activeTracer()) return undefined;
  return tracedFetch({
    name: `chat ${model}`,
    attributes: { [GEN_AI_OPERATION_NAME]: 'chat', [GEN_AI_SYSTEM]: provider, [GEN_AI_REQUEST_MODEL]: model },
  });
}

// -------------------------------------------------------------------------------------------------
// Webhooks

/**
 * One webhook delivery attempt as a client span of the run's trace (`stored`: the run's trace
 * context). `fn`'s result, when it carries `kind` / `statusCode`, is recorded on the span; the span is
 * active inside `fn`, so `injectTraceHeaders` there sends its `traceparent` to the receiver.
 */
export function traceWebhookDelivery<T extends { kind?: string; statusCode?: number | null }>(
  stored: unknown,
  d: { id: string; runId: string; eventType: string; attempts: number },
  fn: () => Promise<T>,
): Promise<T> {
  const tracer = activeTracer();
  if (!tracer) return fn();
  const parent = contextFromCarrier(stored);
  const span = tracer.startSpan(
    `webhook ${d.eventType}`,
    {
      kind: SpanKind.CLIENT,
      attributes: {
        [ATTR_HTTP_REQUEST_METHOD]: 'POST',
        'wr.run.id': d.runId,
        'wr.webhook.delivery_id': d.id,
        'wr.webhook.event_type': d.eventType,
        'wr.webhook.attempt': d.attempts + 1,
      },
    },
    parent,
  );
  return within(span, parent, async () => {
    const r = await fn();
    if (typeof r.statusCode === 'number') span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, r.statusCode);
    if (r.kind) span.setAttribute('wr.webhook.outcome', r.kind);
    if (r.kind === 'retry' || r.kind === 'final') span.setStatus({ code: SpanStatusCode.ERROR });
    return r;
  });
}
