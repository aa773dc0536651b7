import createClient, { type Client } from 'openapi-fetch';
import { ApiError, ConnectionError, WaitTimeoutError } from './errors.ts';
import type { paths } from './generated/api.ts';
import { backoffMs, sleep } from './retry.ts';
import { RunStream, type StreamOptions, type StreamSource } from './stream.ts';
import {
  isTerminal,
  type AcceptedRun,
  type AcceptUpdateResponse,
  type CancelRunResponse,
  type CancelRunsResponse,
  type InputValue,
  type ListRunsQuery,
  type ListWorkflowsQuery,
  type Run,
  type RunEvent,
  type RunListPage,
  type StartRunsItem,
  type StartRunsResponse,
  type ReplayRunRequest,
  type ReplayRunsRequest,
  type ReplayRunsResponse,
  type RunSetRequest,
  type WorkflowDetail,
  type WorkflowListPage,
  type WorkflowVersionsPage,
} from './types.ts';

export const DEFAULT_BASE_URL = 'http://localhost:8080/v1';

export interface ClientOptions {
  /** The secret API key, sent as `Authorization: Bearer <key>`. */
  apiKey: string;
  /** The API root including `/v1`. Default `http://localhost:8080/v1`. */
  baseUrl?: string;
  /** Attempts per request, the first included, for network errors, 429 and 500/502/503/504. Default 5. */
  maxAttempts?: number;
  /** A 429 whose `Retry-After` asks for longer than this is not waited for: the ApiError is thrown. Default 60 s. */
  maxRetryAfterMs?: number;
  /** Base of the exponential backoff between attempts when the server gives no `Retry-After`. Default 500 ms. */
  retryBaseMs?: number;
  fetch?: typeof globalThis.fetch;
  userAgent?: string;
}

export interface StartRunOptions {
  /** Input values keyed by nodeId (preferred) or exact name, from the workflow's `inputSchema`. */
  inputs?: Record<string, InputValue>;
  /** An immutable workflow version to run. */
  version?: string;
  /** Sent as `Idempotency-Key`; generated (a UUID) unless given. Every retry of this call reuses it. */
  idempotencyKey?: string;
  /**
   * Seconds (1..60) the server may hold the request for a short run to finish (`Prefer: wait=N`). Honoured
   * only when the answer carries `Preference-Applied`; otherwise the run is simply accepted.
   */
  wait?: number;
  /** The run's labels (at most 16 string keys to strings), shown on every view and matched by `listRuns({ metadata })`. No secrets. */
  metadata?: Record<string, string>;
  /** A deadline such as `30s`, `5m`, `1h` (at most 24h), sent as `Cancel-After`: the run is cancelled if it has not ended by then. */
  cancelAfter?: string;
  /** A delayed start such as `30s`, `10m`, `2h`, `7d` (at most 7 days), sent as `Start-After`; the run shows `scheduledFor`. */
  startAfter?: string;
  /** A delayed start as an instant (RFC 3339, at most 7 days ahead), sent as the body's `startAt`; not with `startAfter`. */
  startAt?: string;
  /**
   * Debounce, trailing: calls with one `key` while its run waits join that run (its inputs become this
   * call's; it starts `delay` after the last call, at most `maxDelay` after the first). `debounced` says
   * whether this call joined.
   */
  debounce?: { key: string; delay: string; maxDelay: string };
  /** `high` (needs an API key allowed it), `normal` (the default) or `low`: admission takes higher first. */
  priority?: 'high' | 'normal' | 'low';
  /** Your own customer or tenant (1..128 characters): admission goes round robin across keys. */
  concurrencyKey?: string;
  /** Runs of `concurrencyKey` in flight at once, at most the API key's bound. */
  maxConcurrentPerConcurrencyKey?: number;
  signal?: AbortSignal;
}

export interface StartRunsOptions {
  /** Sent as the batch's `Idempotency-Key`; generated (a UUID) unless given. Every retry of this call reuses it. */
  idempotencyKey?: string;
  /** A deadline such as `30s`, `5m`, `1h` for every run, sent as `Cancel-After`. */
  cancelAfter?: string;
  /** A delayed start such as `10m` or `2h` for every run, sent as `Start-After` (an item may give `startAt` instead). */
  startAfter?: string;
  signal?: AbortSignal;
}

/** `Cancel-After` and `Start-After` as given. */
const timingHeaders = (opts: { cancelAfter?: string; startAfter?: string }): Record<string, string> => ({
  ...(opts.cancelAfter ? { 'Cancel-After': opts.cancelAfter } : {}),
  ...(opts.startAfter ? { 'Start-After': opts.startAfter } : {}),
});

/** What `startRun` returns: the accepted run, plus the finished Run when the server waited for it. */
export interface StartedRun extends AcceptedRun {
  idempotencyKey: string;
  /** True when the server answered with an earlier run for the same key (`Idempotent-Replayed: true`). */
  replayed: boolean;
  /** True when the call joined a waiting run of its debounce key (`Debounced: true`). */
  debounced: boolean;
  /** The run, already terminal, when `wait` was honoured (`Preference-Applied`); null otherwise. */
  run: Run | null;
}

export interface WaitOptions {
  /** Give up (WaitTimeoutError) after this long; the run goes on. Default: no limit. */
  timeoutMs?: number;
  /** First poll interval; grows to 3 s. Default 1 s (the API recommends polling every 1–3 s). */
  intervalMs?: number;
  signal?: AbortSignal;
  /** Called with each non-terminal Run seen while waiting. */
  onPoll?: (run: Run) => void;
}

type Outcome = { data?: unknown; error?: unknown; response: Response };
const RETRYABLE_STATUS = new Set([429, 500, 502, 503, 504]);

/**
 * A typed client of the Workflow Run REST API (v1) over openapi-fetch. Every request is retried on
 * network errors, 429 (after `Retry-After`) and 500/502/503/504, a bounded number of times: reads and
 * cancel are idempotent by the API's rules, and `startRun` always sends an Idempotency-Key, the same on
 * every attempt, so a retried start never creates or charges a second run. Failures are `ApiError`s
 * carrying the envelope's `code`, `message` and `details`; an unreachable service is a `ConnectionError`.
 */
export class WorkflowRunClient implements StreamSource {
  readonly baseUrl: string;
  readonly http: Client<paths>;
  readonly #opts: Required<Pick<ClientOptions, 'maxAttempts' | 'maxRetryAfterMs' | 'retryBaseMs'>>;

  constructor(opts: ClientOptions) {
    if (!opts.apiKey) throw new TypeError('apiKey is required');
    this.baseUrl = (opts.baseUrl ?? DEFAULT_BASE_URL).replace(/\/+$/, '');
    this.#opts = { maxAttempts: opts.maxAttempts ?? 5, maxRetryAfterMs: opts.maxRetryAfterMs ?? 60_000, retryBaseMs: opts.retryBaseMs ?? 500 };
    this.http = createClient<paths>({
      baseUrl: this.baseUrl,
      headers: { authorization: `Bearer ${opts.apiKey}`, ...(opts.userAgent ? { 'user-agent': opts.userAgent } : {}) },
      ...(opts.fetch ? { fetch: opts.fetch } : {}),
    });
  }

  listWorkflows(query: ListWorkflowsQuery = {}, signal?: AbortSignal): Promise<WorkflowListPage> {
    return this.#data(() => this.http.GET('/workflows', { params: { query }, signal }), signal) as Promise<WorkflowListPage>;
  }

  getWorkflow(id: string, signal?: AbortSignal): Promise<WorkflowDetail> {
    return this.#data(() => this.http.GET('/workflows/{id}', { params: { path: { id } }, signal }), signal) as Promise<WorkflowDetail>;
  }

  listWorkflowVersions(id: string, query: { offset?: number; limit?: number } = {}, signal?: AbortSignal): Promise<WorkflowVersionsPage> {
    return this.#data(() => this.http.GET('/workflows/{id}/versions', { params: { path: { id }, query }, signal }), signal) as Promise<WorkflowVersionsPage>;
  }

  acceptWorkflowUpdate(id: string, signal?: AbortSignal): Promise<AcceptUpdateResponse> {
    return this.#data(() => this.http.POST('/workflows/{id}/accept-update', { params: { path: { id } }, signal }), signal) as Promise<AcceptUpdateResponse>;
  }

  /**
   * POST /runs with an Idempotency-Key (generated unless given), retried with that same key. With `wait`
   * it asks the server to answer with the finished run (`Prefer: wait=N`) and believes it only when the
   * answer says `Preference-Applied`.
   */
  async startRun(workflow: string, opts: StartRunOptions = {}): Promise<StartedRun> {
    const idempotencyKey = opts.idempotencyKey ?? globalThis.crypto.randomUUID();
    const body = {
      workflow,
      inputs: opts.inputs ?? {},
      ...(opts.version ? { version: opts.version } : {}),
      ...(opts.metadata ? { metadata: opts.metadata } : {}),
      ...(opts.startAt ? { startAt: opts.startAt } : {}),
      ...(opts.debounce ? { debounce: opts.debounce } : {}),
      ...(opts.priority ? { priority: opts.priority } : {}),
      ...(opts.concurrencyKey === undefined ? {} : { concurrencyKey: opts.concurrencyKey }),
      ...(opts.maxConcurrentPerConcurrencyKey === undefined ? {} : { maxConcurrentPerConcurrencyKey: opts.maxConcurrentPerConcurrencyKey }),
    };
    const headers: Record<string, string> = { 'Idempotency-Key': idempotencyKey, ...timingHeaders(opts) };
    if (opts.wait !== undefined) headers.Prefer = `wait=${Math.max(1, Math.min(60, Math.round(opts.wait)))}`;
    const { data, response } = await this.#send(() => this.http.POST('/runs', { body, headers, signal: opts.signal }), opts.signal);
    const replayed = response.headers.get('idempotent-replayed') === 'true';
    const debounced = response.headers.get('debounced') === 'true';
    const applied = response.status === 200 && /\bwait\b/i.test(response.headers.get('preference-applied') ?? '');
    const wrapped = (data as { run?: AcceptedRun | Run } | undefined)?.run;
    if (wrapped && 'statusUrl' in wrapped) return { ...wrapped, idempotencyKey, replayed, debounced, run: null };
    // The inline answer (200) is the Run itself; accept it wrapped in `run` as well.
    const run = (wrapped ?? data) as Run;
    const statusUrl = response.headers.get('location') ?? `${this.baseUrl}/runs/${run.id}`;
    return {
      id: run.id,
      status: 'accepted',
      statusUrl,
      eventsUrl: `${statusUrl}/events`,
      streamUrl: `${statusUrl}/stream`,
      idempotencyKey,
      replayed,
      debounced,
      run: applied && isTerminal(run.status) ? run : null,
    };
  }

  /**
   * POST /runs/batch: up to 1,000 runs in one call, each what `startRun` sends, answered item by item
   * (`{index, run}` or `{index, error}`) in order. Sent with an Idempotency-Key for the whole batch
   * (generated unless given) and retried with it, so a retried batch starts each run once.
   */
  async startRuns(runs: StartRunsItem[], opts: StartRunsOptions = {}): Promise<StartRunsResponse & { idempotencyKey: string }> {
    const idempotencyKey = opts.idempotencyKey ?? globalThis.crypto.randomUUID();
    const headers: Record<string, string> = { 'Idempotency-Key': idempotencyKey, ...timingHeaders(opts) };
    const { data } = await this.#send(() => this.http.POST('/runs/batch', { body: { runs }, headers, signal: opts.signal }), opts.signal);
    return { ...(data as StartRunsResponse), idempotencyKey };
  }

  getRun(id: string, signal?: AbortSignal): Promise<Run> {
    return this.#data(() => this.http.GET('/runs/{id}', { params: { path: { id } }, signal }), signal) as Promise<Run>;
  }

  listRuns(query: ListRunsQuery = {}, signal?: AbortSignal): Promise<RunListPage> {
    return this.#data(() => this.http.GET('/runs', { params: { query }, signal }), signal) as Promise<RunListPage>;
  }

  /** The run's whole event log after `afterSequence` (default: all), following `hasMore` page by page. */
  async listRunEvents(runId: string, opts: { afterSequence?: number; signal?: AbortSignal } = {}): Promise<RunEvent[]> {
    const events: RunEvent[] = [];
    let after = opts.afterSequence ?? 0;
    for (;;) {
      const page = (await this.#data(
        () => this.http.GET('/runs/{run_id}/events', { params: { path: { run_id: runId }, query: { afterSequence: after } }, signal: opts.signal }),
        opts.signal,
      )) as { events: RunEvent[]; hasMore: boolean };
      events.push(...page.events);
      if (!page.hasMore || page.events.length === 0) return events;
      after = page.events[page.events.length - 1]!.sequence;
    }
  }

  /** Cancels a run in flight; a terminal run is returned as it is (`cancelRequested: false`). */
  cancelRun(id: string, signal?: AbortSignal): Promise<CancelRunResponse> {
    return this.#data(() => this.http.POST('/runs/{id}/cancel', { params: { path: { id } }, signal }), signal) as Promise<CancelRunResponse>;
  }

  /**
   * Moves the start of a run still waiting for its delayed start to `startAt` (RFC 3339; at or before now:
   * at once); 409 `not_scheduled` once it entered the queue. Returns the run.
   */
  rescheduleRun(id: string, startAt: string, signal?: AbortSignal): Promise<Run> {
    const body = { startAt };
    return this.#data(() => this.http.POST('/runs/{id}/reschedule', { params: { path: { id } }, body, signal }), signal) as Promise<Run>;
  }

  // Runs in sets (POST /runs/cancel, POST /runs/{id}/replay, POST /runs/replay).

  /**
   * Cancels the runs named by `ids` or matched by `filter` (one page of at most 1,000; pass the answer's
   * `nextCursor` as `cursor` for the next), each as cancelRun would; `dryRun` only counts.
   */
  cancelRuns(set: RunSetRequest, opts: { dryRun?: boolean; signal?: AbortSignal } = {}): Promise<CancelRunsResponse> {
    const query = opts.dryRun ? { dryRun: true } : {};
    return this.#data(() => this.http.POST('/runs/cancel', { params: { query }, body: set, signal: opts.signal }), opts.signal) as Promise<CancelRunsResponse>;
  }

  /**
   * Starts a new run with run `id`'s workflow, version (or `version: 'current'`), inputs (with `inputs`
   * merged over them: password inputs must be given again) and metadata (unless given). Retried safely
   * under one Idempotency-Key.
   */
  async replayRun(id: string, opts: ReplayRunRequest & { idempotencyKey?: string; signal?: AbortSignal } = {}): Promise<StartedRun> {
    const { idempotencyKey = globalThis.crypto.randomUUID(), signal, ...body } = opts;
    const headers = { 'Idempotency-Key': idempotencyKey };
    const { data, response } = await this.#send(() => this.http.POST('/runs/{id}/replay', { params: { path: { id } }, body, headers, signal }), signal);
    const run = (data as { run: AcceptedRun }).run;
    return { ...run, idempotencyKey, replayed: response.headers.get('idempotent-replayed') === 'true', debounced: false, run: null };
  }

  /** replayRun for each run named by `ids` or matched by `filter` (one page, as cancelRuns): one item per run. */
  replayRuns(request: ReplayRunsRequest, signal?: AbortSignal): Promise<ReplayRunsResponse> {
    return this.#data(() => this.http.POST('/runs/replay', { body: request, signal }), signal) as Promise<ReplayRunsResponse>;
  }

  /** Polls GET /runs/{id} (1 s, growing to 3 s) until the run is terminal; returns the terminal Run. */
  async waitForRun(id: string, opts: WaitOptions = {}): Promise<Run> {
    const deadline = opts.timeoutMs === undefined ? Infinity : Date.now() + opts.timeoutMs;
    let interval = Math.max(250, opts.intervalMs ?? 1000);
    for (;;) {
      const run = await this.getRun(id, opts.signal);
      if (isTerminal(run.status)) return run;
      opts.onPoll?.(run);
      const left = deadline - Date.now();
      if (left <= 0) throw new WaitTimeoutError(id, run.status);
      await sleep(Math.min(interval, left), opts.signal);
      interval = Math.min(3000, interval * 1.5);
    }
  }

  /**
   * Starts a run and returns it terminal: the server may answer a short run inline (`Prefer: wait`);
   * otherwise (or on a server without it) the run is polled.
   */
  async runAndWait(workflow: string, opts: StartRunOptions & Omit<WaitOptions, 'signal'> = {}): Promise<Run> {
    const waitSeconds = opts.wait ?? Math.min(60, opts.timeoutMs === undefined ? 60 : Math.floor(opts.timeoutMs / 1000));
    const started = await this.startRun(workflow, { ...opts, wait: waitSeconds >= 1 ? waitSeconds : undefined });
    return started.run ?? this.waitForRun(started.id, opts);
  }

  /**
   * Follows a run over SSE: an async iterable of the snapshot(s) and of every event exactly once, in
   * sequence order, resuming with `Last-Event-ID` after a drop; `outputs` rebuilds each node's text from
   * its deltas. See RunStream.
   */
  streamRun(runId: string, opts: StreamOptions = {}): RunStream {
    return new RunStream(this, runId, opts);
  }

  /** One GET of the SSE stream after `after` (used by RunStream): the response body, or an ApiError. */
  async openStream(runId: string, after: number, signal: AbortSignal): Promise<ReadableStream<Uint8Array>> {
    const header = after > 0 ? { 'Last-Event-ID': after } : {};
    const { data } = await this.#send(
      () =>
        this.http.GET('/runs/{id}/stream', {
          params: { path: { id: runId }, header },
          parseAs: 'stream',
          signal,
          headers: { accept: 'text/event-stream' },
        }),
      signal,
      1,
    );
    return data as ReadableStream<Uint8Array>;
  }

  /** Delay before retry `attempt` (1-based) when the server names none. */
  backoff(attempt: number): number {
    return backoffMs(attempt, this.#opts.retryBaseMs);
  }

  async #data(call: () => Promise<Outcome>, signal?: AbortSignal): Promise<unknown> {
    return (await this.#send(call, signal)).data;
  }

  /** Runs `call` until it succeeds, fails for good, or the attempts run out. */
  async #send(call: () => Promise<Outcome>, signal?: AbortSignal, maxAttempts = this.#opts.maxAttempts): Promise<{ data: unknown; response: Response }> {
    for (let attempt = 1; ; attempt++) {
      let outcome: Outcome;
      try {
        outcome = await call();
      } catch (err) {
        if (signal?.aborted) throw signal.reason ?? err;
        if (attempt >= maxAttempts) throw new ConnectionError(this.baseUrl, err);
        await sleep(this.backoff(attempt), signal);
        continue;
      }
      const { response } = outcome;
      if (response.ok) return { data: outcome.data, response };
      const error = ApiError.from(response, outcome.error);
      if (!RETRYABLE_STATUS.has(response.status) || attempt >= maxAttempts) throw error;
      const wait = error.retryAfterSeconds === null ? this.backoff(attempt) : error.retryAfterSeconds * 1000;
      if (wait > this.#opts.maxRetryAfterMs) throw error;
      await sleep(wait, signal);
    }
  }
}
