import type { IncomingMessage, ServerResponse } from 'node:http';
import { ApolloServer, HeaderMap, type ApolloServerPlugin } from '@apollo/server';
import { ApolloServerPluginLandingPageDisabled } from '@apollo/server/plugin/disabled';
import {
  execute,
  GraphQLError,
  NoSchemaIntrospectionCustomRule,
  specifiedRules,
  subscribe,
  validate,
  type DocumentNode,
  type ExecutionArgs,
  type GraphQLFormattedError,
  type GraphQLSchema,
  type ValidationRule,
} from 'graphql';
import { createHandler as createSseHandler, type OperationContext } from 'graphql-sse';
import type { RequestBodies } from '../http/request-bodies.ts';
import { SHUTDOWN_RETRY_MS, type Handler, type HttpServer, type RequestContext } from '../http/server.ts';
import type { Deps } from '../runs/deps.ts';
import { argumentError } from './argument-check.ts';
import { createContext, type GraphqlContext } from './context.ts';
import { formatGraphQLError } from './errors.ts';
import { costError, depthLimitRule, PARSE_OPTIONS, parseQuery } from './limits.ts';
import { graphqlSchema } from './schema.ts';
import { tracingPlugin } from './tracing-plugin.ts';

/**
 * The internal GraphQL adapter on the service's node:http server (docs/design/graphql.md):
 * - `POST /graphql` (and GET for queries): Apollo Server 5 through executeHTTPGraphQLRequest;
 * - `/graphql/stream`: graphql-sse (subscriptions, and queries/mutations if a client sends them there).
 * Both are reached only with `Authorization: Bearer <INTERNAL_API_TOKEN>` (src/graphql/on-demand.ts
 * answers anything else 401 before this is built). Both apply the same limits: size (the parser's token limit), depth (validation), page
 * size (resolvers) and a cost budget computed with the variables, and answer errors in the same shape.
 * In production mode introspection is off (the explorer page is on-demand.ts's).
 */

const MAX_GRAPHQL_BODY = 256 * 1024;
/** The internal token's place among request bodies on their way (one token per deployment). */
const TOKEN_BODIES = 'graphql-token';
const readGraphqlBody = (bodies: RequestBodies, req: IncomingMessage, ctx: RequestContext) => bodies.read(req, ctx, TOKEN_BODIES, MAX_GRAPHQL_BODY);

function sendGraphqlError(res: ServerResponse, status: number, message: string, code: string): void {
  const body = JSON.stringify({ errors: [{ message, extensions: { code } }] });
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

export function validationRules(production: boolean): ValidationRule[] {
  return [depthLimitRule(), ...(production ? [NoSchemaIntrospectionCustomRule] : [])];
}

/** The checks that need the operation and its variables: its arguments (argument-check.ts), then the cost budget. */
function operationError(
  schema: GraphQLSchema,
  document: DocumentNode,
  operationName: string | null | undefined,
  variables: Record<string, unknown> | null | undefined,
): GraphQLError | null {
  return argumentError(schema, document, operationName, variables) ?? costError(schema, document, operationName, variables);
}

/** Apollo plugin: operationError, before anything executes. */
const operationPlugin: ApolloServerPlugin<GraphqlContext> = {
  async requestDidStart() {
    return {
      async didResolveOperation({ schema, document, operationName, request }) {
        const err = operationError(schema, document, operationName, request.variables);
        if (err) throw err;
      },
    };
  },
};

/** The handlers of GRAPHQL_PATH and GRAPHQL_STREAM_PATH, built once (src/graphql/on-demand.ts mounts them). */
export interface GraphqlHandlers {
  graphql: Handler;
  stream: Handler;
}

/** Builds the schema, starts Apollo and graphql-sse's handler, and ends open subscriptions when `http` closes. */
export async function graphqlHandlers(http: HttpServer, deps: Deps): Promise<GraphqlHandlers> {
  const { schema } = await graphqlSchema();
  const production = deps.config.production;
  const format = (formatted: GraphQLFormattedError, err: unknown) => formatGraphQLError(formatted, err, deps.log);

  const apollo = new ApolloServer<GraphqlContext>({
    schema,
    introspection: !production,
    includeStacktraceInErrorResponses: false,
    stopOnTerminationSignals: false,
    logger: deps.log.child({ component: 'graphql' }),
    parseOptions: PARSE_OPTIONS,
    validationRules: validationRules(production),
    formatError: format,
    // Apollo's landing page loads its Sandbox from a CDN; browsers get GraphiQL from this server instead.
    plugins: [tracingPlugin, operationPlugin, ApolloServerPluginLandingPageDisabled()],
  });
  await apollo.start();

  const graphql: Handler = async (req, res, ctx) => {
    await serveApollo(apollo, deps, http.bodies, req, res, ctx);
  };

  const rules = [...specifiedRules, ...validationRules(production)];
  const guarded =
    (run: (args: ExecutionArgs) => unknown) =>
    (args: ExecutionArgs): unknown => {
      const err = operationError(args.schema, args.document, args.operationName, args.variableValues);
      return err ? { errors: [err] } : run(args);
    };
  const sse = createSseHandler<IncomingMessage, { res: ServerResponse; requestId: string }, OperationContext>({
    schema,
    validate: (s, document) => validate(s, document, rules),
    // Parsed here rather than by graphql-sse, so that the token limit applies and a parse failure is answered
    // as on POST /graphql (400, GRAPHQL_PARSE_FAILED).
    onSubscribe: (req, params) => {
      const document = parseQuery(params.query);
      if (document instanceof GraphQLError) {
        const body = JSON.stringify({ errors: [format(document.toJSON(), document)] });
        return [body, { status: 400, statusText: 'Bad Request', headers: { 'content-type': 'application/json; charset=utf-8' } }];
      }
      const contextValue = createContext(deps, req.context.requestId) as unknown as OperationContext;
      return { schema, document, operationName: params.operationName, variableValues: params.variables, contextValue };
    },
    execute: guarded(execute) as never,
    subscribe: guarded(subscribe) as never,
    onNext: (_ctx, _req, result) => {
      if (!result.errors?.length) return result;
      const errors = result.errors.map((e) => format(e.toJSON ? e.toJSON() : (e as unknown as GraphQLFormattedError), e));
      return { ...result, errors: errors as unknown as GraphQLError[] };
    },
  });

  // Subscriptions never end by themselves: at shutdown each open stream ends with the REST streams'
  // reconnect hint, so its client resubscribes to another process.
  const open = new Set<ServerResponse>();
  http.onClose(() => {
    for (const res of open) if (!res.writableEnded) res.end(`retry: ${SHUTDOWN_RETRY_MS}\n\n`);
  });
  const stream: Handler = async (req, res, ctx) => {
    await serveSse(sse, http.bodies, req, res, ctx, open);
  };
  return { graphql, stream };
}

async function serveApollo(
  apollo: ApolloServer<GraphqlContext>,
  deps: Deps,
  bodies: RequestBodies,
  req: IncomingMessage,
  res: ServerResponse,
  ctx: RequestContext,
): Promise<void> {
  const headers = new HeaderMap();
  for (const [key, value] of Object.entries(req.headers)) {
    if (value !== undefined) headers.set(key, Array.isArray(value) ? value.join(', ') : value);
  }
  let body: unknown;
  if (req.method === 'POST') {
    const text = await readGraphqlBody(bodies, req, ctx);
    const type = headers.get('content-type') ?? '';
    if (text.length && type.includes('json')) {
      try {
        body = JSON.parse(text);
      } catch {
        return sendGraphqlError(res, 400, 'the request body is not valid JSON', 'BAD_REQUEST');
      }
    } else body = text.length ? text : undefined;
  }
  const result = await apollo.executeHTTPGraphQLRequest({
    httpGraphQLRequest: { method: (req.method ?? 'GET').toUpperCase(), headers, search: ctx.url.search, body },
    context: async () => createContext(deps, ctx.requestId),
  });
  for (const [key, value] of result.headers) res.setHeader(key, value);
  res.statusCode = result.status ?? 200;
  if (result.body.kind === 'complete') {
    res.end(result.body.string);
    return;
  }
  for await (const chunk of result.body.asyncIterator) res.write(chunk);
  res.end();
}

type SseHandler = ReturnType<typeof createSseHandler<IncomingMessage, { res: ServerResponse; requestId: string }, OperationContext>>;

/** graphql-sse's node:http glue (as in graphql-sse/lib/use/http), with a bounded request body. */
async function serveSse(
  handler: SseHandler,
  bodies: RequestBodies,
  req: IncomingMessage,
  res: ServerResponse,
  ctx: RequestContext,
  open: Set<ServerResponse>,
): Promise<void> {
  // A POST's body is read before graphql-sse sees it, so one that stalls or is one too many is answered
  // as on /graphql (408 or 429, the connection closed), not as graphql-sse's 400 on a body that failed.
  const posted = req.method === 'POST' ? await readGraphqlBody(bodies, req, ctx) : null;
  const [body, init] = await handler({
    method: req.method ?? 'GET',
    url: req.url ?? '/',
    headers: {
      get(key: string) {
        const h = req.headers[key.toLowerCase()];
        return Array.isArray(h) ? h.join('\n') : h;
      },
    },
    body: async () => posted ?? readGraphqlBody(bodies, req, ctx),
    raw: req,
    context: { res, requestId: ctx.requestId },
  });
  res.writeHead(init.status, init.statusText, init.headers);
  if (!body || typeof body === 'string') {
    await new Promise<void>((resolve) => res.end(body ?? undefined, () => resolve()));
    return;
  }
  const stop = () => void body.return(undefined);
  res.once('close', stop);
  open.add(res);
  try {
    for await (const chunk of body) {
      if (!res.writable) break;
      const ok = await new Promise<boolean>((resolve) => res.write(chunk, (err) => resolve(!err)));
      if (!ok) break;
    }
  } finally {
    open.delete(res);
    res.off('close', stop);
    if (!res.writableEnded) res.end();
  }
}
