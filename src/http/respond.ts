import type { IncomingMessage, ServerResponse } from 'node:http';
import { ApiError, errorBody } from '../domain/errors.ts';
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
  const headers = errorHeaders(e);
  // Answered before its body arrived: the rest would have to be read and thrown away to reuse the
  // connection, and a body that stalls would hold it. The connection closes with the answer instead.
  if (!res.req.complete) headers.Connection = 'close';
  sendJson(res, e.status, { error: errorBody(e) }, headers);
}

export const MAX_BODY_BYTES = 1024 * 1024;

/**
 * Reads a JSON body with a size limit; the caller decides what an empty body means. Listens for the
 * stream's events rather than iterating it: for the small bodies of this API an async iterator cost
 * more CPU than the rest of the read. `timeout`: a body not complete within `ms` is refused with
 * `refusal()`, the rest left unread.
 */
export function readBody(req: IncomingMessage, limit = MAX_BODY_BYTES, timeout?: { ms: number; refusal: () => ApiError }): Promise<string> {
  const declared = Number(req.headers['content-length'] ?? NaN);
  if (declared > limit) return Promise.reject(new ApiError('payload_too_large', `the request body exceeds ${limit} bytes`));
  // Already read to its end, or already closed: no event will come.
  if (req.readableEnded) return Promise.resolve('');
  if (req.destroyed) return Promise.reject(new ApiError('invalid_request', 'the request body was not received completely'));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onTimeout = () => {
      stop();
      req.pause();
      reject(timeout!.refusal());
    };
    const timer = timeout ? setTimeout(onTimeout, timeout.ms) : undefined;
    const stop = () => {
      clearTimeout(timer);
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onBroken);
      req.off('close', onClose);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limit) return void chunks.push(chunk);
      stop();
      // The rest is left unread: node:http discards it once the answer is written.
      req.pause();
      reject(new ApiError('payload_too_large', `the request body exceeds ${limit} bytes`));
    };
    const onEnd = () => {
      stop();
      resolve(chunks.length === 1 ? chunks[0].toString('utf8') : Buffer.concat(chunks, size).toString('utf8'));
    };
    // The client went away mid-body: nothing to answer and nothing wrong with the service.
    const onBroken = (cause?: unknown) => {
      stop();
      reject(new ApiError('invalid_request', 'the request body was not received completely', cause === undefined ? undefined : { cause }));
    };
    // Closed before its end was read (listeners go at the end): no end will come, whatever arrived.
    const onClose = () => onBroken();
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onBroken);
    req.on('close', onClose);
  });
}
