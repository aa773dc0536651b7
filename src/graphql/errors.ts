import { ApolloServerErrorCode } from '@apollo/server/errors';
import { GraphQLError, type GraphQLFormattedError } from 'graphql';
import { ApiError } from '../domain/errors.ts';
import type { Logger } from '../logger.ts';
import { parseFailure } from './limits.ts';

/**
 * Errors on the graph: a service's ApiError becomes a GraphQLError whose `extensions.code` is the REST
 * code in upper case (NOT_FOUND, FORBIDDEN, CANCEL_UNAVAILABLE, …; invalid_request and invalid_cursor
 * are BAD_USER_INPUT, GraphQL's usual code). A query that cannot be parsed is GRAPHQL_PARSE_FAILED, whatever
 * the parser threw. Anything unexpected is logged and answered as a bare INTERNAL_SERVER_ERROR, never with
 * its message or stack.
 */

const INPUT_CODES = new Set(['invalid_request', 'invalid_cursor', 'invalid_inputs']);

export function toGraphQLError(err: unknown): unknown {
  if (err instanceof GraphQLError) return err;
  if (err instanceof ApiError) {
    const extensions: Record<string, unknown> = { code: INPUT_CODES.has(err.code) ? 'BAD_USER_INPUT' : err.code.toUpperCase() };
    if (err.details) extensions.details = err.details;
    return new GraphQLError(err.message, { extensions, originalError: err });
  }
  return err;
}

export const notFoundError = (what: string) => new GraphQLError(`${what} not found`, { extensions: { code: 'NOT_FOUND' } });

/** Finds the error a resolver threw, under graphql-js's located wrapper. */
function original(err: unknown): unknown {
  let e = err;
  while (e instanceof GraphQLError && e.originalError && e.originalError !== e) e = e.originalError;
  return e;
}

/** Whether an error is ours to show (a GraphQLError raised on purpose, or an ApiError). */
function isExpected(err: unknown): boolean {
  const o = original(err);
  if (o instanceof ApiError) return true;
  if (o instanceof GraphQLError) return true; // validation, coercion, our own GraphQLErrors
  return false;
}

/** Apollo's formatError and the graphql-sse formatter share this. */
export function formatGraphQLError(formatted: GraphQLFormattedError, err: unknown, log: Logger): GraphQLFormattedError {
  // Apollo's parse failure wraps whatever the parser threw; a stack overflow on a deeply nested query is
  // still a failure to parse, not an internal error.
  if (formatted.extensions?.code === ApolloServerErrorCode.GRAPHQL_PARSE_FAILED && !(original(err) instanceof GraphQLError)) {
    const failure = parseFailure(original(err));
    return { message: failure.message, extensions: failure.extensions };
  }
  if (isExpected(err)) {
    const o = original(err);
    if (o instanceof ApiError) {
      const g = toGraphQLError(o) as GraphQLError;
      return { message: g.message, locations: formatted.locations, path: formatted.path, extensions: g.extensions };
    }
    // `http` is a status hint for Apollo (which drops it); the stream has no status to set.
    const { stacktrace: _s, http: _h, ...extensions } = (formatted.extensions ?? {}) as Record<string, unknown>;
    // Apollo relabels every validation error GRAPHQL_VALIDATION_FAILED; our rules' own codes
    // (QUERY_TOO_DEEP) win, so both endpoints answer the same code.
    if (o instanceof GraphQLError && typeof o.extensions?.code === 'string') extensions.code = o.extensions.code;
    return { ...formatted, extensions };
  }
  log.error({ err: original(err) }, 'graphql resolver failed');
  return {
    message: 'an unexpected error occurred',
    locations: formatted.locations,
    path: formatted.path,
    extensions: { code: 'INTERNAL_SERVER_ERROR' },
  };
}
