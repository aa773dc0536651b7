import { existsSync, readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { fileURLToPath } from 'node:url';
import { OpenAPIBackend, type Context, type Document, type Handler, type Request } from 'openapi-backend';
import { parse as parseYaml } from 'yaml';
import { ApiError } from '../../domain/errors.ts';
import { authenticateKey, requireScope } from '../../services/auth/authenticate-key.ts';
import type { Principal } from '../../domain/principal.ts';
import { traceRoute } from '../../observability/trace-spans.ts';
import type { Deps } from '../../runs/deps.ts';
import { refuseStart } from '../../runs/counted-start.ts';
import { PostgresWindowLimiter, SlidingWindowLimiter, type RateLimiter } from '../../runs/rate-limiter.ts';
import { UnlimitedStreamSlots } from '../../runs/stream-slots.ts';
import { SHUTDOWN_RETRY_MS, type HttpServer, type RequestContext } from '../server.ts';
import { operations } from './handlers.ts';
import { DocumentRouter } from './document-router.ts';
import { HeartbeatTicker } from './heartbeat-ticker.ts';
import { header, type RestCall } from './rest-call.ts';
import { integerTextError, requestAjv, validationError, type ValidatedContext } from './request-validation.ts';

/**
 * The /v1 facade (docs/architecture.md, "A REST request"). openapi-backend routes every request by
 * openapi/openapi.yaml, authenticates it (the `bearerAuth` security handler, with the operation's
 * `x-scopes`), validates its path, query and header parameters against the document, and calls the
 * handler registered under the operation's `operationId`. Handlers translate HTTP to service calls;
 * the rules the document cannot state (bodies, inputs, idempotency) live in the services.
 */

export const OPENAPI_FILE = fileURLToPath(new URL('../../../openapi/openapi.yaml', import.meta.url));
/** The same document as JSON, which `npm run build` writes into its output only (src/build/parsed-data.ts). */
const OPENAPI_JSON_FILE = fileURLToPath(new URL('../../../openapi/openapi.json', import.meta.url));
const METHODS = ['get', 'post', 'put', 'patch', 'delete', 'head', 'options'] as const;
const API_ROOT = '/v1';
const DOCUMENT_PATH = `${API_ROOT}/openapi.json`;
/** The operations that start runs: every request past authentication and scope counts in the key's rate window (src/runs/counted-start.ts). */
const STARTS = new Set(['startRun', 'startRuns']);

/**
 * The compiled service reads the JSON the build wrote (parsing YAML costs a start far more CPU and
 * garbage); run from source, the YAML is the only copy.
 */
export function loadOpenApiDocument(): Document {
  if (existsSync(OPENAPI_JSON_FILE)) return JSON.parse(readFileSync(OPENAPI_JSON_FILE, 'utf8')) as Document;
  return parseYaml(readFileSync(OPENAPI_FILE, 'utf8')) as Document;
}

/** What openapi-backend passes each handler after its context: the exchange being answered. */
interface Exchange {
  req: IncomingMessage;
  res: ServerResponse;
  ctx: RequestContext;
  /** The request as given to openapi-backend. */
  request: Request;
}

/**
 * The document openapi-backend works on: without request bodies, which the services check themselves
 * to answer the spec's body codes (`invalid_json`, `missing_workflow`, `invalid_inputs`, …). Changes
 * `definition` in place: the process holds one parsed copy of the document (the served one is text).
 */
function withoutRequestBodies(definition: Document): Document {
  for (const item of Object.values(definition.paths ?? {})) {
    for (const method of METHODS) delete (item as Record<string, { requestBody?: unknown } | undefined>)[method]?.requestBody;
  }
  return definition;
}

export async function mountRest(http: HttpServer, deps: Deps): Promise<void> {
  const definition = loadOpenApiDocument();
  // The file's server is relative; the served copy names this service's absolute URL, known once the
  // port is bound (PUBLIC_BASE_URL, else http://localhost:<port>/v1). Until the first request it is
  // kept as text, far smaller than a parsed copy.
  let documentText: string | undefined = JSON.stringify(definition);
  let documentJson: string | undefined;
  const servedDocument = () => {
    if (documentJson === undefined) {
      const served = JSON.parse(documentText!) as Document;
      served.servers = [{ url: deps.baseUrl(), description: 'This service' }];
      documentJson = JSON.stringify(served);
      documentText = undefined;
    }
    return documentJson;
  };
  // Several API processes share a Postgres server, and so the window; PGlite has one process.
  const limiter: RateLimiter = deps.config.databaseUrl ? new PostgresWindowLimiter(deps.orm) : new SlidingWindowLimiter();
  const streams = deps.streams ?? new UnlimitedStreamSlots();
  const heartbeats = new HeartbeatTicker(deps.config.sseHeartbeatMs);
  // Streams never end by themselves: at shutdown they end with a hint to reconnect (elsewhere) soon.
  http.onClose(() => heartbeats.endAll(SHUTDOWN_RETRY_MS));

  /** An operation handler of handlers.ts, given the call it expects. */
  const operation =
    (handler: (call: RestCall) => Promise<void>): Handler =>
    (api: Context, exchange: Exchange) =>
      handler({ ...exchange, api, deps, limiter, streams, heartbeats, bodies: http.bodies, principal: api.security?.bearerAuth as Principal });

  // `quick` skips openapi-backend's definition check, which knows only OpenAPI 3.0 (and would reject
  // this 3.1 document); request validation runs on Ajv 2020 (request-validation.ts).
  const api = new OpenAPIBackend({
    definition: withoutRequestBodies(definition),
    apiRoot: API_ROOT,
    quick: true,
    strict: true,
    ignoreTrailingSlashes: false,
    customizeAjv: requestAjv,
    securityHandlers: {
      // Any one of the operation's `x-scopes` lets the caller in.
      async bearerAuth(api: Context, { req }: Exchange) {
        const principal = await authenticateKey(deps, header(req, 'authorization'));
        requireScope(principal, (api.operation as { 'x-scopes'?: string[] })['x-scopes'] ?? ['run:read', 'run:execute']);
        return principal;
      },
    },
    handlers: {
      ...Object.fromEntries(Object.entries(operations).map(([operationId, handler]) => [operationId, operation(handler)])),
      async getOpenApiDocument(_api: Context, { req, res }: Exchange) {
        res.writeHead(200, { 'Content-Type': 'application/json; charset=utf-8', 'Cache-Control': 'public, max-age=300' });
        res.end(req.method === 'HEAD' ? undefined : servedDocument());
      },
      postRoutingHandler(api: Context, { ctx, req, request }: Exchange) {
        if (!api.operation) return;
        ctx.route = `${API_ROOT}${api.operation.path}`;
        traceRoute(req.method, ctx.route);
        // An operation that cannot answer 400 ignores a query string (a cache buster on the document).
        if (lenient.has(api.operation.operationId)) request.query = {};
      },
      unauthorizedHandler(api: Context) {
        throw (api.security?.bearerAuth as { error?: ApiError } | undefined)?.error ?? new ApiError('unauthorized', 'missing or invalid API key');
      },
      async validationFail(api: ValidatedContext) {
        throw await refused(api, validationError(api));
      },
      async preOperationHandler(api: Context, { req, ctx }: Exchange) {
        const error = integerTextError(api, ctx.url.searchParams, req.headers);
        if (error) throw await refused(api, error);
      },
      notFound(_api: Context, { req, ctx }: Exchange) {
        throw new ApiError('not_found', `no route for ${req.method} ${ctx.path}`);
      },
      methodNotAllowed(_api: Context, { req, ctx }: Exchange) {
        // openapi-backend names no allowed methods: the path is matched once per method.
        const allow = METHODS.filter((method) => api.matchOperation({ method, path: ctx.path, headers: {} })).map((m) => m.toUpperCase());
        if (ctx.path === DOCUMENT_PATH) allow.push('HEAD');
        throw new ApiError('method_not_allowed', `${req.method} is not allowed on ${ctx.path}; allowed: ${allow.join(', ')}`, { allow });
      },
    },
  });
  /** A request refused by the document's rules; a POST /runs counts in its key's rate window whatever is wrong with it. */
  async function refused(api: Context, error: ApiError): Promise<unknown> {
    return STARTS.has(api.operation.operationId ?? '') ? refuseStart(api.security?.bearerAuth as Principal, limiter, error) : error;
  }
  await api.init();
  // Its router, compiled once (document-router.ts); the validator matches and parses through it too.
  api.router = api.validator.router = new DocumentRouter({ definition: api.definition, apiRoot: API_ROOT, ignoreTrailingSlashes: false });
  // An operation's validators are compiled by its first request (`quick`): a process compiles the
  // validators of the operations it serves, not of every one at start.
  const lenient = new Set(
    api
      .getOperations()
      .filter((op) => !op.responses?.['400'])
      .map((op) => op.operationId),
  );

  http.mount(
    API_ROOT,
    (req, res, ctx) => {
      try {
        // Path parameters are percent-decoded by the router, which throws on a malformed escape ("%E0%A4%A").
        decodeURIComponent(ctx.path);
      } catch {
        throw new ApiError('not_found', `no route for ${req.method} ${ctx.path}`);
      }
      const query = queryOf(ctx.url.searchParams);
      // A HEAD of the document is answered as its GET (Node sends no body).
      const method = req.method === 'HEAD' && ctx.path === DOCUMENT_PATH ? 'get' : (req.method ?? 'GET');
      const request: Request = { method, path: ctx.path, query: query as Request['query'], headers: req.headers as Record<string, string | string[]> };
      return api.handleRequest(request, { req, res, ctx, request });
    },
    '',
  );
}

/**
 * A request's query for openapi-backend: no prototype, so "constructor", "__proto__" or "toString" are
 * parameter names like any other; a repeated one becomes an array, which the document's scalar schemas
 * refuse. `name[KEY]=VALUE` (a `deepObject` parameter: `metadata[KEY]`) becomes the member KEY of an
 * object `name`, with no prototype either.
 */
export function queryOf(params: URLSearchParams): Record<string, unknown> {
  const query = Object.create(null) as Record<string, unknown>;
  const add = (into: Record<string, unknown>, name: string, value: string) => {
    const prior = into[name];
    into[name] = prior === undefined ? value : [...(Array.isArray(prior) ? (prior as readonly unknown[]) : [prior]), value];
  };
  for (const [name, value] of params) {
    const member = /^([A-Za-z]+)\[(.*)\]$/s.exec(name);
    if (!member) {
      add(query, name, value);
      continue;
    }
    const [, object, key] = member as unknown as [string, string, string];
    const prior = query[object];
    // `metadata=x` beside `metadata[k]=y`: an array, which the object's schema refuses.
    if (prior !== undefined && (typeof prior !== 'object' || Array.isArray(prior))) add(query, object, value);
    else add((query[object] ??= Object.create(null)) as Record<string, unknown>, key, value);
  }
  return query;
}
