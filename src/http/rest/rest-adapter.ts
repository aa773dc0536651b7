import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { OpenAPIBackend, type Context, type Document, type Operation } from 'openapi-backend';
import { parse as parseYaml } from 'yaml';
import { ApiError } from '../../domain/errors.ts';
import { authenticateKey, requireScope } from '../../services/auth/authenticate-key.ts';
import { traceRoute } from '../../observability/trace-spans.ts';
import type { Deps } from '../../services/deps.ts';
import { PostgresWindowLimiter, SlidingWindowLimiter, type RateLimiter } from '../../services/runs/rate-limiter.ts';
import type { HttpServer } from '../server.ts';
import { operations } from './handlers.ts';
import { HeartbeatTicker } from './heartbeat-ticker.ts';
import { header, type RestHandler } from './rest-call.ts';
import { RouteTable } from './route-table.ts';
import { UnlimitedStreamSlots } from '../../services/streams/stream-slots.ts';

/**
 * The /v1 facade. openapi/openapi.yaml is the routing table (openapi-backend matches operations by
 * it), the scope list (`x-scopes`) and, in tests, the schema every response is validated against.
 * Handlers only translate HTTP to service calls; request rules live in the services so GraphQL and
 * REST enforce the same ones.
 */

export const OPENAPI_FILE = fileURLToPath(new URL('../../../openapi/openapi.yaml', import.meta.url));
const METHODS = ['get', 'post', 'put', 'patch', 'delete', 'head', 'options'] as const;

export function loadOpenApiDocument(): Document {
  return parseYaml(readFileSync(OPENAPI_FILE, 'utf8')) as Document;
}

interface OperationPlan {
  /** The route template (metrics label, span name). */
  route: string;
  handler: RestHandler | undefined;
  /** Any one of them lets the caller in (`x-scopes`). */
  scopes: string[];
  /** The operation's query parameter names. */
  declared: Set<string | undefined>;
}

export async function mountRest(http: HttpServer, deps: Deps): Promise<void> {
  const definition = loadOpenApiDocument();
  // The file's server is relative; the served copy names this service's absolute URL, known once the
  // port is bound (PUBLIC_BASE_URL, else http://localhost:<port>/v1).
  let documentJson: string | undefined;
  const servedDocument = () =>
    (documentJson ??= JSON.stringify({ ...definition, servers: [{ url: deps.baseUrl(), description: 'This service' }] }));
  // Routing only: the services validate requests themselves to answer with the spec's exact codes,
  // and openapi-backend's default validator does not speak OpenAPI 3.1 (stack notes).
  const api = new OpenAPIBackend({ definition, validate: false, quick: true, ignoreTrailingSlashes: false });
  await api.init();
  const ops = api.getOperations();
  const routes = new RouteTable(ops);
  // What each request of an operation needs from it, read once from the document rather than per request.
  const plans = new Map<Operation, OperationPlan>();
  for (const operation of ops) {
    plans.set(operation, {
      route: `/v1${operation.path}`,
      handler: operations[operation.operationId as keyof typeof operations] as RestHandler | undefined,
      scopes: (operation as unknown as { 'x-scopes'?: string[] })['x-scopes'] ?? ['run:read', 'run:execute'],
      declared: new Set(((operation.parameters ?? []) as { in?: string; name?: string }[]).filter((p) => p.in === 'query').map((p) => p.name)),
    });
  }
  // Several API processes share a Postgres server, and so the window; PGlite has one process.
  const limiter: RateLimiter = deps.config.databaseUrl ? new PostgresWindowLimiter(deps.orm) : new SlidingWindowLimiter();
  const streams = deps.streams ?? new UnlimitedStreamSlots();
  const heartbeats = new HeartbeatTicker(deps.config.sseHeartbeatMs);

  http.mount('/v1', async (req, res, ctx) => {
    const path = ctx.path.slice('/v1'.length) || '/';
    const method = (req.method ?? 'GET').toLowerCase();
    if (path === '/openapi.json' && (method === 'get' || method === 'head')) {
      ctx.route = '/v1/openapi.json';
      res.writeHead(200, { 'Content-Type': 'application/json; charset=utf-8', 'Cache-Control': 'public, max-age=300' });
      res.end(method === 'head' ? undefined : servedDocument());
      return;
    }
    try {
      // Path parameters are percent-decoded by the router, which throws on a malformed escape ("%E0%A4%A").
      decodeURIComponent(path);
    } catch {
      throw new ApiError('not_found', `no route for ${req.method} ${ctx.path}`);
    }
    const operation = routes.match(method, path);
    if (!operation) {
      const allow = METHODS.filter((m) => routes.match(m, path)).map((m) => m.toUpperCase());
      if (path === '/openapi.json') allow.push('GET', 'HEAD');
      if (allow.length) {
        throw new ApiError('method_not_allowed', `${req.method} is not allowed on ${ctx.path}; allowed: ${allow.join(', ')}`, {
          allow,
        });
      }
      throw new ApiError('not_found', `no route for ${req.method} ${ctx.path}`);
    }
    const { route, handler, scopes, declared } = plans.get(operation)!;
    ctx.route = route;
    traceRoute(req.method, route);
    if (!handler) throw new ApiError('internal_error', 'operation not implemented');

    const principal = await authenticateKey(deps, header(req, 'authorization'));
    requireScope(principal, scopes);

    // No prototype: "constructor", "__proto__" or "toString" are parameter names like any other.
    const query = Object.create(null) as Record<string, string>;
    for (const [k, v] of ctx.url.searchParams) {
      // A repeated parameter of the operation is ambiguous; the services reject the array form. Others are
      // the handlers' business (unknown ones are rejected, operations without parameters ignore them).
      if (Object.hasOwn(query, k) && declared.has(k)) throw new ApiError('invalid_request', `query parameter "${k}" is given more than once`);
      query[k] = v;
    }
    const apiContext = { operation, request: { method, path, headers: {}, query, params: routes.params(operation, path) } } as unknown as Context;
    await handler({ req, res, ctx, api: apiContext, deps, limiter, streams, heartbeats, principal });
  }, '');
}
