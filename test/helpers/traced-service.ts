import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startOtlpReceiver, type OtlpReceiver } from './otlp-receiver.ts';
import { startProviderStub, type ProviderStub, type ProviderStubOptions } from './provider-stub.ts';
import { startService, type ServiceProcess } from './service-process.ts';

/**
 * The tracing tests' world: the real service as a child process (the tracing SDK is process-global, so
 * it never starts inside the test process), a real OTLP/HTTP receiver, the provider stub, and one local
 * HTTP server that plays the target of an http.request node (`/echo`) and a webhook receiver (`/hook`).
 * The catalog has one workflow: input → text.template → llm.chat (stub) → http.request (/echo) → output,
 * and a webhook endpoint on the buyer's account. Handles, ids and secrets are fresh per world, so a
 * shared Postgres server keeps worlds apart.
 */

export interface SeenRequest {
  path: string;
  headers: http.IncomingHttpHeaders;
}

export interface TracedWorld {
  readonly svc: ServiceProcess;
  readonly url: string;
  receiver: OtlpReceiver;
  stub: ProviderStub;
  /** Requests the /echo and /hook server received. */
  seen: SeenRequest[];
  apiKey: string;
  workflowId: string;
  internalToken: string;
  /** POSTs a run (with `headers`); its id. */
  post(headers?: Record<string, string>): Promise<string>;
  /** Waits until the run is terminal with its webhook delivered; its status. */
  waitEnd(runId: string): Promise<string>;
  /** post, then waitEnd. */
  runToEnd(headers?: Record<string, string>): Promise<{ runId: string; runStatus: string }>;
  /** kill -9, then the service again on the same data and variables. */
  restart(): Promise<void>;
  close(): Promise<void>;
}

export async function startTracedWorld(env: Record<string, string>, opts: { tracing?: boolean; stub?: ProviderStubOptions } = {}): Promise<TracedWorld> {
  const receiver = await startOtlpReceiver();
  const stub = await startProviderStub(opts.stub);
  const seen: SeenRequest[] = [];
  const target = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      seen.push({ path: req.url ?? '/', headers: req.headers });
      res.writeHead(200, { 'content-type': 'text/plain' }).end('echoed');
    });
  });
  await new Promise<void>((r) => target.listen(0, '127.0.0.1', r));
  const targetUrl = `http://127.0.0.1:${(target.address() as AddressInfo).port}`;

  const tag = randomBytes(4).toString('hex');
  const apiKey = `wr_trace_${tag}_${randomBytes(8).toString('hex')}`;
  const workflowId = randomUUID();
  const internalToken = `internal-${randomBytes(12).toString('hex')}`;
  const dir = mkdtempSync(join(tmpdir(), 'wr-tracing-'));
  const catalog = join(dir, 'catalog.yaml');
  writeFileSync(
    catalog,
    `pricing:
  stepUsd: "0.000100"
  models:
    gpt-4o-mini: { input: "0.15", output: "0.60" }
accounts:
  - handle: tracer-${tag}
    walletUsd: "10.000000"
    apiKeys:
      - { secret: ${apiKey}, scopes: [run:execute, run:read] }
    webhooks:
      - { url: "${targetUrl}/hook", secret: whsec_${randomBytes(24).toString('base64')} }
workflows:
  - id: ${workflowId}
    owner: tracer-${tag}
    name: Traced ${tag}
    runModel: free
    listing: public
    versions:
      - label: v1
        graph:
          nodes:
            - { id: topic, kind: input.text, name: Topic, required: true }
            - { id: say, kind: text.template, template: "Tell me about {{topic}}" }
            - { id: ask, kind: llm.chat, provider: openai, model: gpt-4o-mini, prompt: "{{say}}" }
            - { id: call, kind: http.request, url: "${targetUrl}/echo?about={{ask}}" }
            - { id: out, kind: output, from: call, name: Answer }
`,
  );
  const serviceEnv = {
    DATA_DIR: dir,
    CATALOG_FILE: catalog,
    INTERNAL_API_TOKEN: internalToken,
    OPENAI_API_KEY: 'sk-test-tracing',
    OPENAI_BASE_URL: stub.baseURLFor('openai'),
    ALLOW_PRIVATE_NETWORK: 'true',
    WEBHOOK_ALLOW_INSECURE: 'true',
    LOG_LEVEL: 'warn',
    ...(opts.tracing === false ? {} : { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: '100', OTEL_SERVICE_NAME: 'wr-tracing-test' }),
    ...env,
  };
  let svc = startService(serviceEnv);
  const close = async () => {
    await svc.stop().catch(() => undefined);
    svc.child.kill('SIGKILL');
    await Promise.all([receiver.close(), stub.close(), new Promise<void>((r) => target.close(() => r()))]);
    rmSync(dir, { recursive: true, force: true });
  };
  let url: string;
  try {
    url = await svc.url;
  } catch (err) {
    await close();
    throw err;
  }
  const auth = { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' };
  const post = async (headers: Record<string, string> = {}) => {
    const res = await fetch(`${url}/v1/runs`, {
      method: 'POST',
      headers: { ...auth, ...headers },
      body: JSON.stringify({ workflow: workflowId, inputs: { topic: 'owls' } }),
    });
    const body = (await res.json()) as any;
    if (res.status !== 202) throw new Error(`POST /runs answered ${res.status}: ${JSON.stringify(body)}`);
    return String(body.run.id);
  };
  const waitEnd = async (runId: string) => {
    const until = Date.now() + 60_000;
    for (;;) {
      const run = (await (await fetch(`${url}/v1/runs/${runId}`, { headers: auth })).json()) as any;
      const runStatus = String(run.status);
      if (['completed', 'failed', 'cancelled'].includes(runStatus) && seen.some((s) => s.path === '/hook')) return runStatus;
      if (Date.now() > until) throw new Error(`run ${runId} did not end with its webhook in time (${runStatus}):\n${svc.output()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  return {
    get svc() {
      return svc;
    },
    get url() {
      return url;
    },
    receiver,
    stub,
    seen,
    apiKey,
    workflowId,
    internalToken,
    post,
    waitEnd,
    async runToEnd(headers = {}) {
      const runId = await post(headers);
      return { runId, runStatus: await waitEnd(runId) };
    },
    async restart() {
      const exited = new Promise((r) => svc.child.once('exit', r));
      svc.child.kill('SIGKILL');
      await exited;
      svc = startService(serviceEnv);
      url = await svc.url;
    },
    close,
  };
}

/** A W3C traceparent with fresh ids: `{ header, traceId, spanId }`. */
export function newTraceparent(): { header: string; traceId: string; spanId: string } {
  const traceId = randomBytes(16).toString('hex');
  const spanId = randomBytes(8).toString('hex');
  return { header: `00-${traceId}-${spanId}-01`, traceId, spanId };
}

/** The trace id in a `traceparent` header value. */
export function traceIdOf(traceparent: unknown): string | null {
  const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$/.exec(String(traceparent ?? ''));
  return m ? m[1]! : null;
}

/** The parent span id in a `traceparent` header value. */
export function spanIdOf(traceparent: unknown): string | null {
  const m = /^00-[0-9a-f]{32}-([0-9a-f]{16})-[0-9a-f]{2}$/.exec(String(traceparent ?? ''));
  return m ? m[1]! : null;
}
