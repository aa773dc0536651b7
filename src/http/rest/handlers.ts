import { ApiError } from '../../domain/errors.ts';
import { parseIntParam } from '../../services/pagination.ts';
import { cancelRun } from '../../services/runs/cancel-run.ts';
import { getRun } from '../../services/runs/get-run.ts';
import { listRunEvents, parseCursor } from '../../services/runs/list-run-events.ts';
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

/** One handler per operationId: HTTP in, service call, HTTP out. */

const param = (c: RestCall, name: string): string => String((c.api.request.params as Record<string, unknown>)[name] ?? '');
const q = (c: RestCall): Record<string, string> => c.api.request.query as Record<string, string>;

function allowOnly(c: RestCall, names: string[]): void {
  for (const k of Object.keys(q(c))) {
    if (!names.includes(k)) throw new ApiError('invalid_request', `unknown query parameter "${k}"; allowed: ${names.join(', ') || 'none'}`);
  }
}

export const operations = {
  async listWorkflows(c: RestCall) {
    allowOnly(c, ['offset', 'limit', 'q', 'runModel', 'access']);
    const query = q(c);
    const body = await listWorkflows(c.deps, c.principal.accountId, {
      offset: parseIntParam('offset', query.offset),
      limit: parseIntParam('limit', query.limit),
      q: query.q,
      runModel: query.runModel,
      access: query.access,
    });
    sendJson(c.res, 200, body);
  },

  async getWorkflow(c: RestCall) {
    allowOnly(c, []);
    sendJson(c.res, 200, await getWorkflow(c.deps, c.principal.accountId, param(c, 'id')));
  },

  async listWorkflowVersions(c: RestCall) {
    allowOnly(c, ['offset', 'limit']);
    const query = q(c);
    const body = await listWorkflowVersions(c.deps, c.principal.accountId, param(c, 'id'), {
      offset: parseIntParam('offset', query.offset),
      limit: parseIntParam('limit', query.limit),
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
    allowOnly(c, ['offset', 'limit', 'status', 'workflow']);
    const query = q(c);
    const body = await listRuns(c.deps, c.principal.accountId, {
      offset: parseIntParam('offset', query.offset),
      limit: parseIntParam('limit', query.limit),
      status: query.status,
      workflow: query.workflow,
    });
    sendJson(c.res, 200, body);
  },

  async getRun(c: RestCall) {
    allowOnly(c, []);
    sendJson(c.res, 200, await getRun(c.deps, c.principal.accountId, param(c, 'id')));
  },

  async cancelRun(c: RestCall) {
    sendJson(c.res, 200, await cancelRun(c.deps, c.principal.accountId, param(c, 'id')));
  },

  async listRunEvents(c: RestCall) {
    allowOnly(c, ['afterSequence']);
    const after = parseCursor(q(c).afterSequence);
    sendJson(c.res, 200, await listRunEvents(c.deps, c.principal.accountId, param(c, 'run_id'), after ?? 0));
  },

  async streamRun(c: RestCall) {
    allowOnly(c, ['afterSequence']);
    await streamRun(c, param(c, 'id'));
  },
};
