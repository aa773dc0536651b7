import { ApiError } from '../../domain/errors.ts';
import { cancelRun } from '../../services/runs/cancel-run.ts';
import { getRun } from '../../services/runs/get-run.ts';
import { listRunEvents } from '../../services/runs/list-run-events.ts';
import { listRuns } from '../../services/runs/list-runs.ts';
import { RequestRate } from '../../services/runs/rate-limiter.ts';
import { startRun } from '../../services/runs/start-run.ts';
import { acceptWorkflowUpdate } from '../../services/workflows/accept-workflow-update.ts';
import { getWorkflow } from '../../services/workflows/get-workflow.ts';
import { listWorkflowVersions } from '../../services/workflows/list-workflow-versions.ts';
import { listWorkflows } from '../../services/workflows/list-workflows.ts';
import { rateLimitHeaders } from '../headers.ts';
import { readBody, sendError, sendJson } from '../respond.ts';
import { answerWhenFinished } from './prefer-wait.ts';
import { header, type RestCall } from './rest-call.ts';
import { streamRun } from './stream-run.ts';

/**
 * One handler per operationId, registered with openapi-backend (rest-adapter.ts): HTTP in, service call,
 * HTTP out. The request was authenticated and its parameters validated against the document before it
 * gets here, query integers already numbers.
 */

const param = (c: RestCall, name: string): string => String((c.api.request.params as Record<string, unknown>)[name]);
const q = (c: RestCall): Record<string, string | number | undefined> => c.api.request.query as Record<string, string | number | undefined>;
const int = (value: string | number | undefined) => (value === undefined ? undefined : Number(value));
const text = (value: string | number | undefined) => (value === undefined ? undefined : String(value));

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
    // Every request that got past authentication and scope counts: one that reaches the workflow read
    // in that read's statement (src/services/runs/start-run.ts), any other on its own before its error is answered, so a full
    // window answers 429 whatever else is wrong with the request (docs/design/rules.md#rate-limit).
    const rate = new RequestRate(c.limiter, c.principal.apiKeyId, c.principal.rateLimitPerMinute);
    const prefer = c.req.headers.prefer;
    const since = prefer === undefined ? 0 : Date.now();
    try {
      const type = header(c.req, 'content-type') ?? '';
      if (!/^application\/([\w.+-]*\+)?json\b/i.test(type)) {
        throw new ApiError('unsupported_media_type', 'Content-Type must be application/json');
      }
      const text = await readBody(c.req);
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        throw new ApiError('invalid_json', 'the request body is not valid JSON');
      }
      const result = await startRun(c.deps, c.principal, { body, idempotencyHeader: header(c.req, 'idempotency-key'), rate });
      const headers: Record<string, string> = {
        Location: result.run.statusUrl,
        ...(result.replayed ? { 'Idempotent-Replayed': 'true' } : {}),
        ...rateLimitHeaders((await rate.count())!),
      };
      if (prefer !== undefined && (await answerWhenFinished(c, result.run.id, prefer, since, headers))) return;
      sendJson(c.res, 202, { run: result.run }, headers);
    } catch (err) {
      let answer = err;
      if (!rate.settled) answer = await rate.count().then(() => err, (refused: unknown) => refused);
      if (rate.decision) for (const [k, v] of Object.entries(rateLimitHeaders(rate.decision))) c.res.setHeader(k, v);
      sendError(c.res, answer);
      if (!(answer instanceof ApiError)) c.ctx.log.error({ err: answer }, 'startRun failed');
    }
  },

  async listRuns(c: RestCall) {
    const query = q(c);
    const body = await listRuns(c.deps, c.principal.accountId, {
      offset: int(query.offset),
      limit: int(query.limit),
      status: text(query.status),
      workflow: text(query.workflow),
    });
    sendJson(c.res, 200, body);
  },

  async getRun(c: RestCall) {
    sendJson(c.res, 200, await getRun(c.deps, c.principal.accountId, param(c, 'id')));
  },

  async cancelRun(c: RestCall) {
    sendJson(c.res, 200, await cancelRun(c.deps, c.principal.accountId, param(c, 'id')));
  },

  async listRunEvents(c: RestCall) {
    sendJson(c.res, 200, await listRunEvents(c.deps, c.principal.accountId, param(c, 'run_id'), int(q(c).afterSequence) ?? 0));
  },

  async streamRun(c: RestCall) {
    await streamRun(c, param(c, 'id'));
  },
};
