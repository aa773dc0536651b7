import { context, propagation, ROOT_CONTEXT, trace, type Context, type Tracer } from '@opentelemetry/api';
import type { Resource } from '@opentelemetry/resources';
import type { SpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { Logger } from '../logger.ts';

/**
 * The process's OpenTelemetry tracing (docs/tracing.md): configured only by the standard `OTEL_*`
 * variables, exported as OTLP over HTTP, and OFF unless an OTLP endpoint is set. Off means no SDK is
 * loaded or started: every helper here and in trace-spans.ts then returns at its first line (a
 * module-level null check), so the request path pays nothing measurable.
 *
 * The SDK is process-global (one provider, one context manager, one propagator); `startTracing` is
 * called by the entry points (src/main.ts, src/worker.ts) before anything else is built.
 */

/** The W3C trace context of a run (`traceparent`, optional `tracestate`), stored in `runs.trace_context`. */
export interface TraceCarrier {
  traceparent: string;
  tracestate?: string;
}

interface Sdk {
  tracer: Tracer;
  processor: SpanProcessor;
  resource: Resource;
  shutdown: () => Promise<void>;
}

let sdk: Sdk | null = null;

const DEFAULT_SERVICE_NAME = 'workflow-run-api';
const INSTRUMENTATION_NAME = 'workflow-run-api';

/** True when the environment asks for tracing: an OTLP endpoint is set and the SDK is not disabled. */
export function tracingConfigured(env: NodeJS.ProcessEnv = process.env): boolean {
  if (
    String(env.OTEL_SDK_DISABLED ?? '')
      .trim()
      .toLowerCase() === 'true'
  )
    return false;
  if (
    String(env.OTEL_TRACES_EXPORTER ?? '')
      .trim()
      .toLowerCase() === 'none'
  )
    return false;
  return Boolean(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim());
}

/** The tracer while tracing is on, else null (the one check every helper makes first). */
export function activeTracer(): Tracer | null {
  return sdk?.tracer ?? null;
}

/** The span pipeline and resource, for the Temporal worker's workflow span sink; null when off. */
export function tracingPipeline(): { processor: SpanProcessor; resource: Resource } | null {
  return sdk ? { processor: sdk.processor, resource: sdk.resource } : null;
}

/**
 * Starts the SDK when `tracingConfigured()`; otherwise does nothing. `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`
 * (or `OTEL_EXPORTER_OTLP_PROTOCOL`) picks `http/protobuf` (the default) or `http/json`; the exporters
 * read the endpoint, headers, timeout and compression variables themselves, the provider reads
 * `OTEL_TRACES_SAMPLER(_ARG)`, `OTEL_BSP_*` and `OTEL_PROPAGATORS`, the resource `OTEL_SERVICE_NAME` and
 * `OTEL_RESOURCE_ATTRIBUTES`.
 */
export async function startTracing(log: Logger, env: NodeJS.ProcessEnv = process.env): Promise<boolean> {
  if (sdk) return true;
  if (!tracingConfigured(env)) return false;
  const [{ NodeTracerProvider, BatchSpanProcessor }, { Resource, envDetectorSync }] = await Promise.all([
    import('@opentelemetry/sdk-trace-node'),
    import('@opentelemetry/resources'),
  ]);
  const requested = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL ?? 'http/protobuf').trim();
  let protocol = requested;
  if (protocol !== 'http/json' && protocol !== 'http/protobuf') {
    log.warn({ protocol: requested }, 'OTLP protocol not supported here (OTLP over HTTP only); using http/protobuf');
    protocol = 'http/protobuf';
  }
  const { OTLPTraceExporter } =
    protocol === 'http/json' ? await import('@opentelemetry/exporter-trace-otlp-http') : await import('@opentelemetry/exporter-trace-otlp-proto');
  // Service name: OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES win over this default.
  const resource = Resource.default()
    .merge(new Resource({ 'service.name': DEFAULT_SERVICE_NAME }))
    .merge(envDetectorSync.detect());
  const processor = new BatchSpanProcessor(new OTLPTraceExporter());
  const provider = new NodeTracerProvider({ resource, spanProcessors: [processor] });
  // Registers the AsyncLocalStorage context manager and the W3C trace-context + baggage propagators.
  provider.register();
  sdk = {
    tracer: provider.getTracer(INSTRUMENTATION_NAME),
    processor,
    resource,
    shutdown: () => provider.shutdown(),
  };
  log.info({ protocol, service: resource.attributes['service.name'] }, 'OpenTelemetry tracing on');
  return true;
}

/** Flushes the spans still buffered and stops the SDK (shutdown of the entry points). */
export async function stopTracing(): Promise<void> {
  const s = sdk;
  if (!s) return;
  sdk = null;
  await s.shutdown().catch(() => undefined);
  trace.disable();
  context.disable();
  propagation.disable();
}

// -------------------------------------------------------------------------------------------------
// Trace context carried by runs

/** The active trace context as a carrier (what POST /runs stores with the run); null when off. */
export function currentTraceCarrier(): string | null {
  if (!sdk) return null;
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  if (!carrier.traceparent) return null;
  const stored: TraceCarrier = { traceparent: carrier.traceparent, ...(carrier.tracestate ? { tracestate: carrier.tracestate } : {}) };
  return JSON.stringify(stored);
}

/** A stored carrier (jsonb comes back as an object, or text) as an OpenTelemetry context; ROOT without one. */
export function contextFromCarrier(stored: unknown): Context {
  let value = stored;
  if (typeof value === 'string') {
    try {
      value = JSON.parse(value);
    } catch {
      return ROOT_CONTEXT;
    }
  }
  if (!value || typeof value !== 'object') return ROOT_CONTEXT;
  const { traceparent, tracestate } = value as Record<string, unknown>;
  if (typeof traceparent !== 'string') return ROOT_CONTEXT;
  const carrier: Record<string, string> = { traceparent };
  if (typeof tracestate === 'string') carrier.tracestate = tracestate;
  return propagation.extract(ROOT_CONTEXT, carrier);
}

/** Runs `fn` inside a run's stored trace context (Temporal client calls join the run's trace). */
export function withStoredTrace<T>(stored: unknown, fn: () => T): T {
  if (!sdk || !stored) return fn();
  return context.with(contextFromCarrier(stored), fn);
}

/** Adds `traceparent` / `tracestate` of the active span to outgoing headers (no-op when off). */
export function injectTraceHeaders(headers: Record<string, string>): void {
  if (!sdk) return;
  propagation.inject(context.active(), headers);
}
