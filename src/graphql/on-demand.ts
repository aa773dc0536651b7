import type { Handler, HttpServer } from '../http/server.ts';
import type { Deps } from '../runs/deps.ts';
import type { GraphqlHandlers } from './adapter.ts';

export const GRAPHQL_PATH = '/graphql';
export const GRAPHQL_STREAM_PATH = '/graphql/stream';

/**
 * Mounts the internal GraphQL API (src/graphql/adapter.ts) at GRAPHQL_PATH and GRAPHQL_STREAM_PATH, built
 * by the first request to either: Apollo, graphql-sse and the schema are the largest part of a start, and
 * a process that no internal client calls never loads them (docs/performance.md, "The process"). Requests
 * that arrive while it is built wait for it; a build that fails is tried again by the next request.
 */
export function mountGraphqlOnDemand(http: HttpServer, deps: Deps): void {
  let built: Promise<GraphqlHandlers> | null = null;
  const handlers = (): Promise<GraphqlHandlers> =>
    (built ??= import('./adapter.ts')
      .then((adapter) => adapter.graphqlHandlers(http, deps))
      .catch((err: unknown) => {
        built = null;
        throw err;
      }));
  const graphql: Handler = async (req, res, ctx) => (await handlers()).graphql(req, res, ctx);
  const stream: Handler = async (req, res, ctx) => (await handlers()).stream(req, res, ctx);
  http.mount((path) => path === GRAPHQL_PATH, graphql, GRAPHQL_PATH);
  http.mount((path) => path === GRAPHQL_STREAM_PATH, stream, GRAPHQL_STREAM_PATH);
}
