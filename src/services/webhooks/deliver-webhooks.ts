import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import { Webhook } from 'standardwebhooks';
import type { Config } from '../../config/config.ts';
import type { Orm } from '../../db/orm.ts';
import type { Logger } from '../../logger.ts';
import type { Sealer } from '../../security/crypto.ts';
import { assertPublicUrl, BlockedAddressError, guardedLookup, HostLookupError } from '../../security/net-guard.ts';
import { injectTraceHeaders } from '../../observability/tracing.ts';
import { traceWebhookDelivery } from '../../observability/trace-spans.ts';
import { fork } from '../../runs/deps.ts';
import { query } from '../../db/statement.ts';
import { CLAIM_WEBHOOK_DELIVERIES, RECORD_WEBHOOK_DELIVERED, RECORD_WEBHOOK_FAILED, RECORD_WEBHOOK_RETRY } from '../../sql/webhook-deliveries.ts';
import { webhookAttempted } from '../../observability/metrics.ts';
import { isoOrNull } from '../../db/sql.ts';
import { mapRunRow, toPublicRun, type RunRow } from '../../runs/run-row.ts';

/**
 * The delivery half of the webhook outbox (docs/design/webhooks.md). FINISH_RUNS writes one row per
 * endpoint in the statement that makes a run terminal; this module claims due rows and POSTs them.
 *
 * At least once, never lost:
 * - Claiming is one short statement (`FOR UPDATE SKIP LOCKED`) that also pushes `next_attempt_at`
 *   forward by a lease. Concurrent workers never claim the same row; a worker that dies mid-send leaves
 *   the row pending with a lease that simply expires, and the row is sent again.
 * - The POST happens outside any transaction. Its outcome is written with a guard on the `attempts`
 *   value seen at claim time, so a worker whose lease ran out cannot overwrite a newer attempt.
 * - The body is rendered at claim time from what never changes after the run ends (webhookBody): the
 *   run as GET /runs/{id} shows it and the row's creation time. The `webhook-id` is the row id, so every
 *   retry is the same message; only `webhook-timestamp` (and so the signature) is fresh per attempt.
 */

/** The retry schedule (docs/design/webhooks.md): the wait after the 1st, 2nd, … failed attempt. */
export const WEBHOOK_BACKOFF_MS: readonly number[] = Object.freeze([5_000, 30_000, 120_000, 600_000, 3_600_000, 21_600_000]);
/** A receiver has this long to answer (headers and body) before the attempt counts as a timeout. */
export const WEBHOOK_TIMEOUT_MS = 10_000;
/** How far a claim pushes `next_attempt_at`: comfortably longer than one attempt can take. */
export const WEBHOOK_LEASE_MS = 60_000;

const MAX_ERROR_LENGTH = 200;
const MAX_RESPONSE_BYTES = 64 * 1024;
const USER_AGENT = 'workflow-run-api-webhooks/1';

/** What delivery needs from `Deps` (a full `Deps` fits). */
export interface WebhookDeps {
  config: Pick<Config, 'webhookAllowInsecure' | 'allowPrivateNetwork'>;
  orm: Orm;
  log: Logger;
  sealer: Pick<Sealer, 'open'>;
}

export interface ClaimOptions {
  /** At most this many rows are claimed. */
  limit: number;
  /** "Now" for the due check and the lease (tests); defaults to the database clock. */
  now?: Date;
  /** Lease length; defaults to `WEBHOOK_LEASE_MS`. */
  leaseMs?: number;
}

export interface DeliverOptions extends ClaimOptions {
  /** Retry schedule; defaults to `WEBHOOK_BACKOFF_MS`. After its last entry the next failure is final. */
  backoffMs?: readonly number[];
  /** Per-attempt timeout; defaults to `WEBHOOK_TIMEOUT_MS`. */
  timeoutMs?: number;
  /**
   * Aborting (shutdown) cancels in-flight sends without recording them: the rows keep their lease and
   * are sent again once it passes.
   */
  signal?: AbortSignal;
  /** A retry was recorded, due at this time (epoch ms): the dispatcher wakes for it. */
  onRetry?: (dueAt: number) => void;
}

export interface ClaimedDelivery {
  id: string;
  endpointId: string;
  runId: string;
  eventType: string;
  /** The JSON body that is signed and sent (webhookBody). */
  body: string;
  /** Attempts recorded before this one. */
  attempts: number;
  url: string;
  secretCiphertext: string;
  /** The endpoint's (and so the run's) account, for log lines. */
  accountId: string;
  /** The run's stored trace context (docs/tracing.md), or null. */
  traceContext?: unknown;
}

/** "Now" as the statements take it: the given time, or null for the database clock. */
function nowParam(now: Date | undefined): string | null {
  return now ? now.toISOString() : null;
}

/**
 * Claims due pending deliveries (`status = 'pending' and next_attempt_at <= now`) and leases them by
 * moving `next_attempt_at` to now + lease. Exported for the dispatcher and for tests that play a worker
 * which claims and then dies.
 */
export async function claimDueDeliveries(deps: Pick<WebhookDeps, 'orm'>, opts: ClaimOptions): Promise<ClaimedDelivery[]> {
  const limit = Math.max(1, Math.floor(opts.limit));
  const leaseMs = opts.leaseMs ?? WEBHOOK_LEASE_MS;
  const now = nowParam(opts.now);
  const rows = await query(fork(deps), CLAIM_WEBHOOK_DELIVERIES, [now, limit, leaseMs]);
  return rows.map((r) => ({
    id: String(r.delivery_id),
    endpointId: String(r.endpoint_id),
    runId: String(r.id),
    eventType: String(r.event_type),
    body: webhookBody(String(r.event_type), r.enqueued_at, mapRunRow(r)),
    attempts: Number(r.attempts),
    url: String(r.url),
    secretCiphertext: String(r.secret_ciphertext),
    accountId: String(r.account_id),
    traceContext: r.trace_context ?? null,
  }));
}

/**
 * A delivery's body (docs/design/webhooks.md#events-and-body): its event type, the time its row was written
 * (the run's end) and the run as GET /runs/{id} shows it (toPublicRun; a terminal run has no queue place).
 * Every input is fixed once the run is terminal, so every attempt renders the same bytes.
 */
export function webhookBody(type: string, enqueuedAt: unknown, run: RunRow): string {
  return JSON.stringify({ type, timestamp: isoOrNull(enqueuedAt), data: toPublicRun(run, null) });
}

/**
 * Claims up to `limit` due deliveries and sends them concurrently. Resolves once every claimed row's
 * attempt is recorded, with the number of rows attempted (delivered or not); a result equal to `limit`
 * means more may be due.
 */
export async function deliverDueWebhooks(deps: WebhookDeps, opts: DeliverOptions): Promise<number> {
  if (opts.signal?.aborted) return 0;
  const claimed = await claimDueDeliveries(deps, opts);
  if (claimed.length === 0) return 0;
  const results = await Promise.allSettled(claimed.map((d) => attemptDelivery(deps, d, opts)));
  for (const [i, r] of results.entries()) {
    if (r.status === 'rejected') {
      // Recording the outcome failed (database trouble): the lease expires and the row is retried.
      const d = claimed[i];
      deps.log.error({ deliveryId: d.id, runId: d.runId, accountId: d.accountId, err: errorText(r.reason) }, 'webhook delivery outcome not recorded');
    }
  }
  return claimed.length;
}

type Outcome =
  | { kind: 'delivered'; statusCode: number }
  | { kind: 'retry'; statusCode: number | null; error: string }
  | { kind: 'final'; statusCode: number | null; error: string }
  | { kind: 'aborted' };

async function attemptDelivery(deps: WebhookDeps, d: ClaimedDelivery, opts: DeliverOptions): Promise<void> {
  const outcome = await traceWebhookDelivery(d.traceContext, d, () => send(deps, d, opts));
  if (outcome.kind === 'aborted') return;
  const recorded = await recordOutcome(deps, d, outcome, opts);
  webhookAttempted(recorded.result, recorded.lag);
  const logFields = {
    deliveryId: d.id,
    endpointId: d.endpointId,
    runId: d.runId,
    accountId: d.accountId,
    attempt: d.attempts + 1,
    statusCode: outcome.statusCode,
  };
  if (outcome.kind === 'delivered') deps.log.debug(logFields, 'webhook delivered');
  else deps.log.warn({ ...logFields, error: outcome.error, final: recorded.result === 'failed' }, 'webhook delivery failed');
}

async function send(deps: WebhookDeps, d: ClaimedDelivery, opts: DeliverOptions): Promise<Outcome> {
  const { webhookAllowInsecure, allowPrivateNetwork } = deps.config;

  let url: URL;
  try {
    url = new URL(d.url);
  } catch {
    return { kind: 'final', statusCode: null, error: 'the endpoint URL is not a valid absolute URL' };
  }
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && webhookAllowInsecure)) {
    return {
      kind: 'final',
      statusCode: null,
      error: url.protocol === 'http:' ? 'blocked: webhook URLs must use https (WEBHOOK_ALLOW_INSECURE is not set)' : 'blocked: webhook URLs must use https',
    };
  }
  try {
    await assertPublicUrl(url.href, { allowPrivateNetwork });
  } catch (err) {
    if (err instanceof BlockedAddressError) return { kind: 'final', statusCode: null, error: `blocked: ${err.message}` };
    // A name that does not resolve may resolve later: retry.
    if (err instanceof HostLookupError) return { kind: 'retry', statusCode: null, error: err.message };
    return { kind: 'retry', statusCode: null, error: errorText(err) };
  }

  let secret: string;
  let signer: Webhook;
  try {
    secret = deps.sealer.open(d.secretCiphertext);
    signer = new Webhook(secret);
  } catch {
    // Most likely a changed ENCRYPTION_KEY; retrying leaves time to fix the configuration.
    return { kind: 'retry', statusCode: null, error: 'the endpoint signing secret could not be read' };
  }

  const attemptAt = new Date();
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'user-agent': USER_AGENT,
    'webhook-id': d.id,
    'webhook-timestamp': String(Math.floor(attemptAt.getTime() / 1000)),
    'webhook-signature': signer.sign(d.id, attemptAt, d.body),
  };
  injectTraceHeaders(headers);

  const result = await post(url, headers, d.body, {
    timeoutMs: opts.timeoutMs ?? WEBHOOK_TIMEOUT_MS,
    lookup: allowPrivateNetwork ? undefined : guardedLookup,
    signal: opts.signal,
  });
  if (result.kind === 'aborted') return result;
  if (result.kind === 'response') {
    if (result.statusCode >= 200 && result.statusCode < 300) return { kind: 'delivered', statusCode: result.statusCode };
    return { kind: 'retry', statusCode: result.statusCode, error: `the endpoint answered HTTP ${result.statusCode}` };
  }
  const error = scrub(result.error, secret);
  // The connect-time guard refused the address the name resolved to (DNS rebinding): permanent.
  if (result.blocked) return { kind: 'final', statusCode: null, error: `blocked: ${error}` };
  return { kind: 'retry', statusCode: null, error };
}

interface Recorded {
  /** `failed`: given up (a permanent failure, or the retry schedule is exhausted). */
  result: 'delivered' | 'retry' | 'failed';
  /** A delivery's lag, enqueued → delivered (seconds). */
  lag: number | null;
}

async function recordOutcome(deps: WebhookDeps, d: ClaimedDelivery, o: Exclude<Outcome, { kind: 'aborted' }>, opts: DeliverOptions): Promise<Recorded> {
  const em = fork(deps);
  const now = nowParam(opts.now);
  // Each write is conditional on the attempts count seen at claim: this worker still owns the attempt.
  if (o.kind === 'delivered') {
    const [row] = await query<{ lag: number | string }>(em, RECORD_WEBHOOK_DELIVERED, [o.statusCode, now, d.id, d.attempts]);
    return { result: 'delivered', lag: row ? Number(row.lag) : null };
  }
  const backoff = opts.backoffMs ?? WEBHOOK_BACKOFF_MS;
  const wait = o.kind === 'final' ? undefined : backoff[d.attempts];
  const error = o.error.length > MAX_ERROR_LENGTH ? `${o.error.slice(0, MAX_ERROR_LENGTH - 1)}…` : o.error;
  if (wait === undefined) {
    await query(em, RECORD_WEBHOOK_FAILED, [o.statusCode, error, d.id, d.attempts]);
    return { result: 'failed', lag: null };
  }
  await query(em, RECORD_WEBHOOK_RETRY, [o.statusCode, error, now, Math.max(0, wait), d.id, d.attempts]);
  opts.onRetry?.((opts.now?.getTime() ?? Date.now()) + Math.max(0, wait));
  return { result: 'retry', lag: null };
}

type PostResult = { kind: 'response'; statusCode: number } | { kind: 'error'; error: string; blocked: boolean } | { kind: 'aborted' };

/**
 * One POST with node:http(s): no redirects followed (a 3xx is a failed attempt), a fresh connection
 * (every connection goes through the address guard), and one deadline for connect, headers and body.
 */
function post(
  url: URL,
  headers: Record<string, string>,
  body: string,
  opts: { timeoutMs: number; lookup: LookupFunction | undefined; signal: AbortSignal | undefined },
): Promise<PostResult> {
  return new Promise((resolve) => {
    let settled = false;
    let statusCode: number | null = null;
    const finish = (r: PostResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onAbort);
      resolve(r);
    };
    const mod = url.protocol === 'https:' ? https : http;
    const req = mod.request(url, {
      method: 'POST',
      headers: { ...headers, 'content-length': String(Buffer.byteLength(body, 'utf8')) },
      agent: false,
      ...(opts.lookup ? { lookup: opts.lookup } : {}),
    });
    const timer = setTimeout(() => {
      // Headers already in: the receiver answered; a slow body does not turn that into a timeout.
      if (statusCode !== null) finish({ kind: 'response', statusCode });
      else finish({ kind: 'error', error: `no response within ${opts.timeoutMs} ms (timeout)`, blocked: false });
      req.destroy();
    }, opts.timeoutMs);
    const onAbort = () => {
      finish({ kind: 'aborted' });
      req.destroy();
    };
    if (opts.signal) {
      opts.signal.addEventListener('abort', onAbort, { once: true });
      if (opts.signal.aborted) onAbort();
    }
    req.on('response', (res) => {
      statusCode = res.statusCode ?? 0;
      let received = 0;
      res.on('data', (chunk: Buffer) => {
        received += chunk.length;
        if (received > MAX_RESPONSE_BYTES) {
          finish({ kind: 'response', statusCode: statusCode! });
          res.destroy();
        }
      });
      res.on('end', () => finish({ kind: 'response', statusCode: statusCode! }));
      res.on('close', () => finish({ kind: 'response', statusCode: statusCode! }));
      res.on('error', () => finish({ kind: 'response', statusCode: statusCode! }));
    });
    req.on('error', (err) => {
      if (statusCode !== null) return finish({ kind: 'response', statusCode });
      const blocked = err instanceof BlockedAddressError || (err as { code?: string }).code === 'blocked_address';
      finish({ kind: 'error', error: errorText(err), blocked });
    });
    req.end(body, 'utf8');
  });
}

function errorText(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    const text = err.message || err.name;
    return typeof code === 'string' && !text.includes(code) ? `${code}: ${text}` : text;
  }
  return String(err);
}

/** Belt and braces: the secret (or its key part) must never reach a stored error text. */
function scrub(text: string, secret: string): string {
  let out = text;
  for (const s of [secret, secret.replace(/^whsec_/, '')]) {
    if (s.length >= 8) out = out.split(s).join('[redacted]');
  }
  return out;
}
