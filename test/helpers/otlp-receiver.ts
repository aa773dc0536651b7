import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';

/**
 * A real OTLP/HTTP trace receiver for the tracing tests: accepts `POST /v1/traces` in both OTLP
 * encodings — `application/json` (http/json) and `application/x-protobuf` (http/protobuf, decoded with
 * the OTLP protobuf definitions generated in @opentelemetry/otlp-transformer) — and keeps every span.
 */

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  /** OTLP span kind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  attributes: Record<string, unknown>;
  service: string;
}

export interface OtlpReceiver {
  url: string;
  spans: ReceivedSpan[];
  /** Content types of the export requests received. */
  contentTypes: string[];
  /** Waits until `done(spans)` holds (polling), else fails with what arrived. */
  waitFor(done: (spans: ReceivedSpan[]) => boolean, timeoutMs?: number): Promise<ReceivedSpan[]>;
  close(): Promise<void>;
}

const require = createRequire(import.meta.url);
// The generated protobufjs root of the OTLP .proto files.
const otlp = require('@opentelemetry/otlp-transformer/build/src/generated/root.js') as {
  opentelemetry: {
    proto: { collector: { trace: { v1: { ExportTraceServiceRequest: { decode(b: Uint8Array): unknown; toObject(m: unknown, o: object): any } } } } };
  };
};
const ExportTraceServiceRequest = otlp.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;

function anyValue(v: any): unknown {
  if (!v || typeof v !== 'object') return v;
  if ('stringValue' in v) return v.stringValue;
  if ('intValue' in v) return Number(v.intValue);
  if ('doubleValue' in v) return Number(v.doubleValue);
  if ('boolValue' in v) return v.boolValue;
  if ('arrayValue' in v) return (v.arrayValue.values ?? []).map(anyValue);
  return v;
}

function attrs(list: any[] | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const a of list ?? []) out[a.key] = anyValue(a.value);
  return out;
}

/** JSON ids are hex strings; protobuf ids arrive as bytes (converted to hex by toObject below). */
function collect(body: any, into: ReceivedSpan[]): void {
  for (const rs of body.resourceSpans ?? []) {
    const service = String(attrs(rs.resource?.attributes)['service.name'] ?? '');
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        into.push({
          traceId: String(s.traceId ?? ''),
          spanId: String(s.spanId ?? ''),
          parentSpanId: String(s.parentSpanId ?? ''),
          name: String(s.name),
          kind: typeof s.kind === 'number' ? s.kind : Number(s.kind ?? 0),
          attributes: attrs(s.attributes),
          service,
        });
      }
    }
  }
}

function toHex(obj: any): any {
  if (obj instanceof Uint8Array) return Buffer.from(obj).toString('hex');
  if (Array.isArray(obj)) return obj.map(toHex);
  if (obj && typeof obj === 'object') return Object.fromEntries(Object.entries(obj).map(([k, v]) => [k, toHex(v)]));
  return obj;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const contentTypes: string[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      const type = String(req.headers['content-type'] ?? '');
      contentTypes.push(type);
      const buf = Buffer.concat(chunks);
      try {
        if (type.includes('json')) collect(JSON.parse(buf.toString('utf8')), spans);
        else collect(toHex(ExportTraceServiceRequest.toObject(ExportTraceServiceRequest.decode(buf), { longs: String, enums: Number })), spans);
        res.writeHead(200, { 'content-type': type.includes('json') ? 'application/json' : 'application/x-protobuf' });
        res.end(type.includes('json') ? '{}' : undefined);
      } catch (err) {
        res.writeHead(400).end(String(err));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    contentTypes,
    async waitFor(done, timeoutMs = 30_000) {
      const until = Date.now() + timeoutMs;
      while (!done(spans)) {
        if (Date.now() > until) {
          throw new Error(`spans did not arrive in time; received:\n${spans.map((s) => `${s.traceId} ${s.name} ${JSON.stringify(s.attributes)}`).join('\n')}`);
        }
        await new Promise((r) => setTimeout(r, 100));
      }
      return spans;
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
