import type { IncomingMessage, ServerResponse } from 'node:http';
import { ApiError } from '../domain/errors.ts';
import { errorHeaders } from './headers.ts';

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': Buffer.byteLength(text),
    'Cache-Control': 'no-store',
    ...headers,
  });
  res.end(text);
}

/** The spec's envelope; anything that is not an ApiError becomes a bare internal_error. */
export function sendError(res: ServerResponse, err: unknown): void {
  const e = err instanceof ApiError ? err : new ApiError('internal_error', 'an unexpected error occurred');
  const body: { error: { code: string; message: string; details?: unknown[] } } = { error: { code: e.code, message: e.message } };
  if (e.details && (e.code === 'invalid_inputs' || e.code === 'integration_connection_required')) body.error.details = e.details;
  sendJson(res, e.status, body, errorHeaders(e));
}

export const MAX_BODY_BYTES = 1024 * 1024;

/** Reads a JSON body with a size limit; the caller decides what an empty body means. */
export async function readBody(req: IncomingMessage, limit = MAX_BODY_BYTES): Promise<string> {
  const declared = Number(req.headers['content-length'] ?? NaN);
  if (declared > limit) throw new ApiError('payload_too_large', `the request body exceeds ${limit} bytes`);
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of req as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > limit) throw new ApiError('payload_too_large', `the request body exceeds ${limit} bytes`);
      chunks.push(chunk);
    }
  } catch (err) {
    if (err instanceof ApiError) throw err;
    // The client went away mid-body: nothing to answer and nothing wrong with the service.
    throw new ApiError('invalid_request', 'the request body was not received completely', { cause: err });
  }
  return Buffer.concat(chunks).toString('utf8');
}
