import { ApiError } from '../../domain/errors.ts';
import { parseJson } from '../../domain/exact-json.ts';
import { cancelRun } from '../../runs/cancel-run.ts';
import { rescheduleRun } from '../../runs/scheduled-runs.ts';
import { cancelRuns } from '../../runs/cancel-runs.ts';
import { replayRun, replayRuns } from '../../runs/replay-run.ts';
import { getRun } from '../../runs/get-run.ts';
import { listRunEvents } from '../../runs/list-run-events.ts';
import { listRuns } from '../../runs/list-runs.ts';
import { quoteCountedBatch, startCountedBatch, startCountedRun } from '../../runs/counted-start.ts';
import { acceptWorkflowUpdate } from '../../services/workflows/accept-workflow-update.ts';
import { getWorkflow } from '../../services/workflows/get-workflow.ts';
import { listWorkflowVersions } from '../../services/workflows/list-workflow-versions.ts';
import { listWorkflows } from '../../services/workflows/list-workflows.ts';
import { batchRateHeaders, rateLimitHeaders } from '../headers.ts';
import { MAX_BODY_BYTES, sendJson } from '../respond.ts';
import { keyHolder } from '../../runs/stream-slots.ts';
import { answerWhenFinished } from './prefer-wait.ts';
import { header, type RestCall } from './rest-call.ts';
import { streamRun } from './stream-run.ts';

/**
 * One handler per operationId, registered with openapi-backend (rest-adapter.ts): HTTP in, service call,
 * HTTP out. The request was authenticated and its parameters validated against the document before it
 * gets here: query integers are valid, still as text.
 */

/** A batch of 1,000 runs with inputs of about 8 KiB each. */
const MAX_BATCH_BODY_BYTES = 8 * 1024 * 1024;

const param = (c: RestCall, name: string): string => String((c.api.request.params as Record<string, unknown>)[name]);
const q = (c: RestCall): Record<string, string | number | undefined> => c.api.request.query as Record<string, string | number | undefined>;
const int = (value: string | number | undefined) => (value === undefined ? undefined : Number(value));
const text = (value: string | number | undefined) => (value === undefined ? undefined : String(value));

/**
 * A JSON request body: its media type, then its text (in time, a bounded number per key, at most
 * `limit` bytes), then its parse (numbers a double cannot hold marked, src/domain/exact-json.ts).
 */
async function readJsonBody(c: RestCall, limit = MAX_BODY_BYTES): Promise<unknown> {
  if (!/^application\/([\w.+-]*\+)?json\b/i.test(header(c.req, 'content-type') ?? '')) {
    throw new ApiError('unsupported_media_type', 'Content-Type must be application/json');
  }
  const text = await c.bodies.read(c.req, c.ctx, keyHolder(c.principal.apiKeyId), limit);
  try {
    return parseJson(text);
  } catch {
    throw new ApiError('invalid_json', 'the request body is not valid JSON');
  }
}

/** readJsonBody, where no body at all (no Content-Type, nothing sent) is undefined. */
async function readOptionalJsonBody(c: RestCall): Promise<unknown> {
  if (header(c.req, 'content-type') !== undefined) return readJsonBody(c);
  if ((await c.bodies.read(c.req, c.ctx, keyHolder(c.principal.apiKeyId), MAX_BODY_BYTES)) === '') return undefined;
  throw new ApiError('unsupported_media_type', 'Content-Type must be application/json');
}

export const operations = {
  async listWorkflows(c: RestCall) {
    const query = q(c);
    const body = await listWorkflows(c.deps, c.principal.accountId, {
      offset: int(query.offset),
      limit: int(query.limit),
      q: text(query.q),
      runModel: text(query.runModel),
      access: text(query.access),
    });
    sendJson(c.res, 200, body);
  },

  async getWorkflow(c: RestCall) {
    sendJson(c.res, 200, await getWorkflow(c.deps, c.principal.accountId, param(c, 'id')));
  },

  async listWorkflowVersions(c: RestCall) {
    const query = q(c);
    const body = await listWorkflowVersions(c.deps, c.principal.accountId, param(c, 'id'), {
      offset: int(query.offset),
      limit: int(query.limit),
    });
    sendJson(c.res, 200, body);
  },

  async acceptWorkflowUpdate(c: RestCall) {
    sendJson(c.res, 200, await acceptWorkflowUpdate(c.deps, c.principal.accountId, param(c, 'id')));
  },

  async startRun(c: RestCall) {
    // The rate window and its refusals are the service's (counted-start.ts); the body is read inside it,
    // so a request refused for its body counts too (one whose body never arrives does not).
    const prefer = c.req.headers.prefer;
    const since = prefer === undefined ? 0 : Date.now();
    const idempotencyHeader = header(c.req, 'idempotency-key');
    const cancelAfterHeader = header(c.req, 'cancel-after');
    const startAfterHeader = header(c.req, 'start-after');
    const result = await startCountedRun(c.deps, c.principal, c.limiter, async () => ({
      body: await readJsonBody(c),
      idempotencyHeader,
      cancelAfterHeader,
      startAfterHeader,
    }));
    const headers: Record<string, string> = {
      Location: result.run.statusUrl,
      ...(result.replayed ? { 'Idempotent-Replayed': 'true' } : {}),
      ...rateLimitHeaders(result.rateLimit),
    };
    if (prefer !== undefined && (await answerWhenFinished(c, result.run.id, prefer, since, headers))) return;
    // A call that joined a waiting run answers that run as it now is (docs/design/flow-control.md#debounce).
    if (result.debounced) return sendJson(c.res, 200, await getRun(c.deps, c.principal.accountId, result.run.id), { ...headers, Debounced: 'true' });
    sendJson(c.res, 202, { run: result.run }, headers);
  },

  async startRuns(c: RestCall) {
    // One request in the key's rate window, counted once its body has arrived (counted-start.ts).
    const idempotencyHeader = header(c.req, 'idempotency-key');
    const cancelAfterHeader = header(c.req, 'cancel-after');
    const startAfterHeader = header(c.req, 'start-after');
    const read = async () => ({ body: await readJsonBody(c, MAX_BATCH_BODY_BYTES), idempotencyHeader, cancelAfterHeader, startAfterHeader });
    if (text(q(c).dryRun) === 'true') {
      const quoted = await quoteCountedBatch(c.deps, c.principal, c.limiter, read);
      return sendJson(c.res, 200, quoted.answer, rateLimitHeaders(quoted.rateLimit));
    }
    const result = await startCountedBatch(c.deps, c.principal, c.limiter, read);
    sendJson(c.res, 202, result.answer, batchRateHeaders(result.rateLimit, result.runBudget));
  },

  async listRuns(c: RestCall) {
    const query = q(c);
    const body = await listRuns(c.deps, c.principal.accountId, {
      offset: int(query.offset),
      limit: int(query.limit),
      status: text(query.status),
      workflow: text(query.workflow),
      metadata: (c.api.request.query as Record<string, unknown>).metadata,
      concurrencyKey: text(query.concurrencyKey),
      createdAfter: text(query.createdAfter),
      createdBefore: text(query.createdBefore),
    });
    sendJson(c.res, 200, body);
  },

  async getRun(c: RestCall) {
    sendJson(c.res, 200, await getRun(c.deps, c.principal.accountId, param(c, 'id')));
  },

  async cancelRun(c: RestCall) {
    sendJson(c.res, 200, await cancelRun(c.deps, c.principal.accountId, param(c, 'id')));
  },

  async rescheduleRun(c: RestCall) {
    sendJson(c.res, 200, await rescheduleRun(c.deps, c.principal.accountId, param(c, 'id'), await readJsonBody(c)));
  },

  // Runs in sets (docs/design/runs-in-sets.md).
  async cancelRuns(c: RestCall) {
    const dryRun = String(q(c).dryRun) === 'true';
    sendJson(c.res, 200, await cancelRuns(c.deps, c.principal.accountId, await readJsonBody(c), { dryRun }));
  },

  async replayRun(c: RestCall) {
    const idempotencyHeader = header(c.req, 'idempotency-key');
    const cancelAfterHeader = header(c.req, 'cancel-after');
    const result = await replayRun(c.deps, c.principal, c.limiter, param(c, 'id'), async () => ({
      body: await readOptionalJsonBody(c),
      idempotencyHeader,
      cancelAfterHeader,
    }));
    const headers = { Location: result.run.statusUrl, ...(result.replayed ? { 'Idempotent-Replayed': 'true' } : {}), ...rateLimitHeaders(result.rateLimit) };
    sendJson(c.res, 202, { run: result.run }, headers);
  },

  async replayRuns(c: RestCall) {
    const { body, rateLimit, runBudget } = await replayRuns(c.deps, c.principal, await readJsonBody(c), c.limiter);
    sendJson(c.res, 200, body, !rateLimit ? {} : runBudget ? batchRateHeaders(rateLimit, runBudget) : rateLimitHeaders(rateLimit));
  },

  async listRunEvents(c: RestCall) {
    sendJson(c.res, 200, await listRunEvents(c.deps, c.principal.accountId, param(c, 'run_id'), int(q(c).afterSequence) ?? 0));
  },

  async streamRun(c: RestCall) {
    await streamRun(c, param(c, 'id'));
  },
};
