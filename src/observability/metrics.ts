import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/**
 * The service's Prometheus series (listed and explained in docs/operations.md). One registry per
 * process: counters are per process, as Prometheus expects (it sums them across instances); the queue
 * gauges are read from the shared database at scrape time, so they are deployment-wide. Recording is
 * cheap on the hot path: label children are bound once and cached, and with METRICS=off
 * (`disableMetrics`) every recording function returns at once.
 */

export const registry = new Registry();
let enabled = true;
let defaultsCollected = false;

/** METRICS=off: nothing is recorded. The bench turns it off and on between rounds to measure its cost. */
export function setMetricsEnabled(on: boolean): void {
  enabled = on;
}

export function metricsEnabled(): boolean {
  return enabled;
}

/** Node's process metrics (CPU, memory, event-loop lag, GC, handles), once per process. */
export function collectProcessMetrics(): void {
  if (defaultsCollected) return;
  defaultsCollected = true;
  collectDefaultMetrics({ register: registry });
}

// ---------------------------------------------------------------------------------------------------
// HTTP server

const httpDuration = new Histogram({
  name: 'http_server_request_duration_seconds',
  help: 'Duration of HTTP server requests (OpenTelemetry http.server.request.duration), by route template',
  labelNames: ['http_route', 'http_request_method', 'http_response_status_code'] as const,
  buckets: [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10],
  registers: [registry],
});

/** OpenTelemetry's known methods; anything else is `_OTHER` (bounded cardinality). */
const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'CONNECT', 'TRACE'];
type HttpChild = ReturnType<typeof httpDuration.labels>;
/** route → (method index × 1000 + status) → bound child: no label object per request. */
const httpChildren = new Map<string, Map<number, HttpChild>>();

function httpChild(route: string, method: string | undefined, status: number): HttpChild {
  let byRoute = httpChildren.get(route);
  if (!byRoute) httpChildren.set(route, (byRoute = new Map<number, HttpChild>()));
  let m = METHODS.indexOf(method ?? '');
  if (m < 0) m = METHODS.length;
  const key = m * 1000 + status;
  let child = byRoute.get(key);
  if (!child) byRoute.set(key, (child = httpDuration.labels(route, METHODS[m] ?? '_OTHER', String(status))));
  return child;
}

/** A response's end, or its connection's close (a client gone, a stream ended). */
export interface ResponseDone {
  (route: string, status: number, seconds: number): void;
}

/**
 * Records a request's duration once its response is done: at once when the handler already ended it
 * (the usual JSON answer: no listener, no closure kept), else when it closes (streams, a client gone).
 * `route` is the template the handler routed to; a response that stays open (an SSE stream) keeps only
 * it and one listener, not the request's context.
 */
export function observeResponse(req: IncomingMessage, res: ServerResponse, started: number, route: string, after?: ResponseDone): void {
  if (!enabled && !after) return;
  if (res.writableEnded || res.destroyed) recordResponse(req, res, started, route, after);
  // 'close' comes once per response: `on` without the wrapper `once` adds.
  else res.on('close', () => recordResponse(req, res, started, route, after));
}

function recordResponse(req: IncomingMessage, res: ServerResponse, started: number, route: string, after?: ResponseDone): void {
  const seconds = (performance.now() - started) / 1000;
  if (enabled) httpChild(route, req.method, res.statusCode).observe(seconds);
  after?.(route, res.statusCode, seconds);
}

// ---------------------------------------------------------------------------------------------------
// Runs

const runsAccepted = new Counter({ name: 'wr_runs_accepted_total', help: 'Runs accepted by POST /runs (replays not counted)', registers: [registry] });
const runsStarted = new Counter({ name: 'wr_runs_started_total', help: 'Runs funded and started (status running)', registers: [registry] });
const runsFinished = new Counter({
  name: 'wr_runs_finished_total',
  help: 'Runs that became terminal, by status and outcome (outcome "none" unless completed)',
  labelNames: ['status', 'outcome'] as const,
  registers: [registry],
});
const finishedChildren = new Map<string, ReturnType<typeof runsFinished.labels>>();

export function runAccepted(): void {
  if (enabled) runsAccepted.inc();
}

export function runStarted(): void {
  if (enabled) runsStarted.inc();
}

export function runFinished(status: string, outcome: string | null | undefined): void {
  if (!enabled) return;
  const o = outcome ?? 'none';
  const key = `${status}/${o}`;
  let child = finishedChildren.get(key);
  if (!child) finishedChildren.set(key, (child = runsFinished.labels(status, o)));
  child.inc();
}

const stepDuration = new Histogram({
  name: 'wr_step_duration_seconds',
  help: "Duration of a step node's work, by node kind (in-memory steps: the computation; llm.chat and http.request: the call)",
  labelNames: ['node_kind'] as const,
  buckets: [0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
  registers: [registry],
});
const stepChildren = new Map<string, ReturnType<typeof stepDuration.labels>>();

export function observeStep(kind: string, seconds: number): void {
  if (!enabled) return;
  let child = stepChildren.get(kind);
  if (!child) stepChildren.set(kind, (child = stepDuration.labels(kind)));
  child.observe(seconds);
}

const queueWait = new Histogram({
  name: 'wr_run_queue_wait_seconds',
  help: 'Time a run waited in the queue, from queued to admitted, by priority and whether it had a concurrency key (counted by the admitting process)',
  labelNames: ['priority', 'keyed'] as const,
  // Up to QUEUE_MAX_WAIT_SECONDS' default (900), past which a queued run fails instead of being admitted.
  buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 900],
  registers: [registry],
});
const queueWaitChildren = new Map<string, ReturnType<typeof queueWait.labels>>();

/** A run admitted after `seconds` in the queue; `priority` is its class's name (high, normal, low). */
export function observeQueueWait(priority: string, keyed: boolean, seconds: number): void {
  if (!enabled || !Number.isFinite(seconds)) return;
  const k = `${priority}/${keyed}`;
  let child = queueWaitChildren.get(k);
  if (!child) queueWaitChildren.set(k, (child = queueWait.labels(priority, String(keyed))));
  child.observe(Math.max(0, seconds));
}

/** Times a synchronous step computation `fn(a, b)` (no closure per call). */
export function timeSyncStep<A, B, R>(kind: string, fn: (a: A, b: B) => R, a: A, b: B): R {
  if (!enabled) return fn(a, b);
  const t0 = performance.now();
  try {
    return fn(a, b);
  } finally {
    observeStep(kind, (performance.now() - t0) / 1000);
  }
}

/** Times an asynchronous step's work `fn(ctx)` (llm.chat, http.request), whatever its end. */
export async function timeStep<C, T>(kind: string, fn: (ctx: C) => Promise<T>, ctx: C): Promise<T> {
  if (!enabled) return fn(ctx);
  const t0 = performance.now();
  try {
    return await fn(ctx);
  } finally {
    observeStep(kind, (performance.now() - t0) / 1000);
  }
}

const providerErrors = new Counter({
  name: 'wr_provider_call_errors_total',
  help: 'Failed model provider calls, by provider and error type',
  labelNames: ['provider', 'error_type'] as const,
  registers: [registry],
});

export function providerCallFailed(provider: string, errorType: string): void {
  if (enabled) providerErrors.labels(provider, errorType).inc();
}

// ---------------------------------------------------------------------------------------------------
// Webhooks

const webhookDeliveries = new Counter({
  name: 'wr_webhook_deliveries_total',
  help: 'Webhook delivery attempts, by result: delivered, retry (failed, tried again later), failed (given up)',
  labelNames: ['result'] as const,
  registers: [registry],
});
const webhookLag = new Histogram({
  name: 'wr_webhook_delivery_lag_seconds',
  help: "Time from a webhook's enqueueing (the run's terminal transition) to its successful delivery",
  buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 3600, 21600],
  registers: [registry],
});

export function webhookAttempted(result: 'delivered' | 'retry' | 'failed', lagSeconds: number | null): void {
  if (!enabled) return;
  webhookDeliveries.labels(result).inc();
  if (lagSeconds !== null && Number.isFinite(lagSeconds)) webhookLag.observe(Math.max(0, lagSeconds));
}

// ---------------------------------------------------------------------------------------------------
// Streams and refusals

const sseStreams = new Gauge({ name: 'wr_sse_streams_open', help: 'Open REST SSE run streams on this process', registers: [registry] });
const subscriptions = new Gauge({
  name: 'wr_graphql_subscriptions_open',
  help: 'Open GraphQL runEvents subscriptions on this process',
  registers: [registry],
});

/** +1 when a stream opens, -1 when it closes (exactly once each). */
export function sseStreamOpen(delta: 1 | -1): void {
  if (enabled) sseStreams.inc(delta);
}

export function subscriptionOpen(delta: 1 | -1): void {
  if (enabled) subscriptions.inc(delta);
}

const rateLimited = new Counter({
  name: 'wr_requests_rate_limited_total',
  help:
    'Requests refused with 429, by limit: runs_per_minute (POST /runs), run_budget (POST /runs/batch), open_streams, ' +
    'or bodies_in_flight (request bodies still arriving)',
  labelNames: ['limit'] as const,
  registers: [registry],
});
const spendCapped = new Counter({
  name: 'wr_requests_spend_capped_total',
  help: "POST /runs refused because the API key's spend cap would be exceeded",
  registers: [registry],
});

export function requestRateLimited(limit: 'runs_per_minute' | 'run_budget' | 'open_streams' | 'bodies_in_flight'): void {
  if (enabled) rateLimited.labels(limit).inc();
}

export function requestSpendCapped(): void {
  if (enabled) spendCapped.inc();
}

const idempotencyDeleted = new Counter({
  name: 'wr_idempotency_records_deleted_total',
  help: 'Expired idempotency records deleted by the sweep (src/runs/idempotency-sweeper.ts)',
  registers: [registry],
});

export function idempotencyRecordsDeleted(n: number): void {
  if (enabled && n > 0) idempotencyDeleted.inc(n);
}

// POST /runs/batch (src/runs/start-batch.ts).
const batchSize = new Histogram({
  name: 'wr_run_batch_size',
  help: 'Items of each POST /runs/batch answered',
  buckets: [1, 10, 50, 100, 250, 500, 1000],
  registers: [registry],
});
const batchItemsRefused = new Counter({
  name: 'wr_run_batch_items_refused_total',
  help: 'Items of POST /runs/batch refused, by error code',
  labelNames: ['code'] as const,
  registers: [registry],
});

export function runBatchAnswered(items: number, refusedCodes: readonly string[]): void {
  if (!enabled) return;
  batchSize.observe(items);
  for (const code of refusedCodes) batchItemsRefused.labels(code).inc();
}

// Runs in sets: bulk cancel and replay (docs/design/runs-in-sets.md).
const bulkCancelled = new Counter({
  name: 'wr_runs_bulk_cancelled_total',
  help: 'Runs cancelled by POST /runs/cancel or the GraphQL cancelRuns (dry runs not counted)',
  registers: [registry],
});
const replays = new Counter({
  name: 'wr_run_replays_total',
  help: 'Replays asked for (POST /runs/{id}/replay, POST /runs/replay, GraphQL replayRuns), by result',
  labelNames: ['result'] as const,
  registers: [registry],
});

export function runsCancelledInBulk(n: number): void {
  if (enabled && n > 0) bulkCancelled.inc(n);
}

export function runReplayed(result: 'accepted' | 'refused', n = 1): void {
  if (enabled && n > 0) replays.labels(result).inc(n);
}
