import type { IncomingMessage, ServerResponse } from 'node:http';
import { constantTimeEqual } from '../security/crypto.ts';

/** The internal GraphQL API's one credential: `Authorization: Bearer <INTERNAL_API_TOKEN>`. */
const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;

export function authorized(req: IncomingMessage, token: string): boolean {
  const header = req.headers.authorization;
  const match = typeof header === 'string' ? BEARER.exec(header) : null;
  // Compare even when absent, so the timing does not tell "no header" from "wrong token".
  return constantTimeEqual(match?.[1] ?? '', token) && match !== null;
}

/** 401 with no data, in GraphQL's error shape. */
export function sendUnauthorized(res: ServerResponse): void {
  const body = JSON.stringify({
    errors: [
      {
        message: 'missing or invalid internal API token; expected "Authorization: Bearer <INTERNAL_API_TOKEN>"',
        extensions: { code: 'UNAUTHENTICATED' },
      },
    ],
  });
  res.writeHead(401, {
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': Buffer.byteLength(body),
    'WWW-Authenticate': 'Bearer realm="internal-graphql"',
    'Cache-Control': 'no-store',
  });
  res.end(body);
}
