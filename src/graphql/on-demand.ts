import { sendExplorer, wantsExplorer } from '../http/docs/mount-docs.ts';
import type { Handler, HttpServer } from '../http/server.ts';
import type { Deps } from '../runs/deps.ts';
import type { GraphqlHandlers } from './adapter.ts';
import { authorized, sendUnauthorized } from './token.ts';

export const GRAPHQL_PATH = '/graphql';
export const GRAPHQL_STREAM_PATH = '/graphql/stream';

/**
 * Mounts the internal GraphQL API (src/graphql/adapter.ts) at GRAPHQL_PATH and GRAPHQL_STREAM_PATH, built
 * by the first authorised request to either: Apollo, graphql-sse and the schema are the largest part of a
 * start, and a process that no internal client calls never loads them (docs/performance.md, "The
 * process"). So the token is checked here, before anything is built: a request without it (a scanner, a
 * probe) is 401 and loads nothing. Outside production mode a browser's GET /graphql gets the GraphiQL
 * explorer (docs/design/api-docs.md) without a token, and without the build: the page holds no data, and
 * the queries it sends carry the token the user sets in it. Requests that arrive while the API is built
 * wait for it; a build that fails answers 500 and the next request builds again.
 */
export function mountGraphqlOnDemand(http: HttpServer, deps: Deps): void {
  const token = deps.config.internalApiToken;
  const explorer = !deps.config.production;
  let built: Promise<GraphqlHandlers> | null = null;
  const handlers = (): Promise<GraphqlHandlers> =>
    (built ??= import('./adapter.ts')
      .then((adapter) => adapter.graphqlHandlers(http, deps))
      .catch((err: unknown) => {
        built = null;
        throw err;
      }));
  const graphql: Handler = async (req, res, ctx) => {
    if (explorer && wantsExplorer(req)) return sendExplorer(req, res, new URL(deps.baseUrl()).origin);
    if (!authorized(req, token)) return sendUnauthorized(res);
    return (await handlers()).graphql(req, res, ctx);
  };
  const stream: Handler = async (req, res, ctx) => {
    if (!authorized(req, token)) return sendUnauthorized(res);
    return (await handlers()).stream(req, res, ctx);
  };
  http.mount((path) => path === GRAPHQL_PATH, graphql, GRAPHQL_PATH);
  http.mount((path) => path === GRAPHQL_STREAM_PATH, stream, GRAPHQL_STREAM_PATH);
}
