import { randomUUID } from 'node:crypto';
import { createServer, STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { performance } from 'node:perf_hooks';
import type { Logger } from '../logger.ts';
import { traceRequest } from '../observability/trace-spans.ts';
import { ApiError } from '../domain/errors.ts';
import { observeResponse, type ResponseDone } from '../observability/metrics.ts';
import { sendError } from './respond.ts';
import { RequestBodies } from './request-bodies.ts';
import { DEFAULT_HTTP_LIMITS, type HttpLimits } from '../config/config.ts';

/**
 * The one node:http server. It stamps every response with X-Request-Id, dispatches by path prefix to
 * the mounted adapters (REST /v1, GraphQL, health) and turns anything thrown into the error envelope.
 */

export type Handler = (req: IncomingMessage, res: ServerResponse, ctx: RequestContext) => Promise<void> | void;

export interface RequestContext {
  requestId: string;
  /** Path without the query string. */
  path: string;
  url: URL;
  log: Logger;
  /** The route template (metrics label): the mount's, refined by an adapter that routes further ('' when unmatched). */
  route: string;
  /** When its headers had arrived (performance.now()): a body's clock starts here (src/http/request-bodies.ts). */
  readonly arrived: number;
}

interface Mount {
  match: (path: string) => boolean;
  handler: Handler;
  route: string;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The `retry:` an SSE stream (REST or GraphQL) ends with at shutdown: about when a load balancer has moved on. */
export const SHUTDOWN_RETRY_MS = 1000;

/** A request's context; its logger (a pino child carrying the request id) is made when first used, which most requests never do. */
class Context implements RequestContext {
  readonly requestId: string;
  readonly path: string;
  readonly url: URL;
  route = '';
  readonly arrived: number;
  readonly #parentLog: Logger;
  #log: Logger | undefined;

  constructor(requestId: string, url: URL, parentLog: Logger, arrived: number) {
    this.requestId = requestId;
    this.arrived = arrived;
    this.path = url.pathname;
    this.url = url;
    this.#parentLog = parentLog;
  }

  get log(): Logger {
    return (this.#log ??= this.#parentLog.child({ requestId: this.requestId }));
  }
}

export class HttpServer {
  readonly server: Server;
  /** Where adapters read request bodies: in time, and a bounded number per key at once. */
  readonly bodies: RequestBodies;
  readonly #mounts: Mount[] = [];
  readonly #log: Logger;
  readonly #closing: (() => void)[] = [];
  /** close() has begun: a hook added from now on runs at once. */
  #closed = false;

  constructor(log: Logger, limits: HttpLimits = DEFAULT_HTTP_LIMITS) {
    this.#log = log;
    this.bodies = new RequestBodies(limits.bodyTimeoutMs, limits.maxBodiesInFlightPerKey);
    this.server = createServer(serverTimeouts(limits), (req, res) => {
      // Last resort: a rejection here would be unhandled and stop the process.
      this.#dispatch(req, res).catch((err: unknown) => {
        this.#log.error({ err }, 'request dispatch failed');
        if (!res.headersSent) sendError(res, err);
        else res.destroy();
      });
    });
    // Requests node:http cannot parse (bad request line, headers too large) still get the envelope.
    this.server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => answerClientError(err, socket));
    // SSE streams and `Prefer: wait` are long-lived; the per-socket inactivity timeout must not cut them.
    this.server.timeout = 0;
  }

  /** `route`: the route template requests of this mount are counted under (default: a string prefix itself). */
  mount(prefix: string | ((path: string) => boolean), handler: Handler, route = typeof prefix === 'string' ? prefix : ''): void {
    const match = typeof prefix === 'function' ? prefix : (path: string) => path === prefix || path.startsWith(prefix.endsWith('/') ? prefix : `${prefix}/`);
    this.#mounts.push({ match, handler, route });
  }

  async #dispatch(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const started = performance.now();
    const incoming = req.headers['x-request-id'];
    const requestId = typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    res.setHeader('X-Request-Id', requestId);
    let url: URL;
    try {
      // An absolute-form request target (`GET http://[ HTTP/1.1`) may not parse as a URL.
      url = new URL(req.url ?? '/', 'http://localhost');
    } catch {
      sendError(res, new ApiError('invalid_request', 'the request target is not a valid URL'));
      return;
    }
    const ctx = new Context(requestId, url, this.#log, started);
    try {
      const mount = this.#mounts.find((m) => m.match(url.pathname));
      if (!mount) throw new ApiError('not_found', `no route for ${req.method} ${url.pathname}`);
      ctx.route = mount.route;
      // The handler's own promise, not one more async function around it (tracing off, traceRequest calls straight through).
      await traceRequest(req, res, url.pathname, () => Promise.resolve(mount.handler(req, res, ctx)));
    } catch (err) {
      if (!(err instanceof ApiError)) ctx.log.error({ err }, 'request failed');
      if (!res.headersSent) sendError(res, err);
      else res.destroy();
    }
    // The access log line is debug: at the default level a request costs no log write.
    observeResponse(req, res, started, ctx.route, this.#log.isLevelEnabled('debug') ? accessLog(req, ctx) : undefined);
  }

  /**
   * Called once close() begins: long-lived responses (SSE) end themselves, with a reconnect hint. A hook
   * added once close() has begun (an adapter built by a request in flight then) runs at once.
   */
  onClose(hook: () => void): void {
    if (this.#closed) hook();
    else this.#closing.push(hook);
  }

  listen(port: number, host: string): Promise<{ port: number; host: string }> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => {
        this.server.off('error', reject);
        const addr = this.server.address();
        resolve({ port: typeof addr === 'object' && addr ? addr.port : port, host });
      });
    });
  }

  /**
   * Stops accepting, drops idle keep-alive sockets and lets in-flight requests finish; long-lived
   * streams (SSE, subscriptions) never finish by themselves, so whatever is still open after the grace
   * period is closed (their clients resume from their last event id).
   */
  close(graceMs = 3000): Promise<void> {
    return new Promise((resolve) => {
      if (!this.server.listening) return resolve();
      // Not unref'd: whoever awaits the close must see it settle, even when nothing else keeps the
      // process alive (the timer is cleared as soon as the server has closed).
      const force = setTimeout(() => this.server.closeAllConnections(), graceMs);
      // A keep-alive connection whose request was in flight stays open once answered (node:http closes
      // only the connections idle at close()): close those as they become idle.
      const idle = setInterval(() => this.server.closeIdleConnections(), 100);
      this.server.close(() => {
        clearTimeout(force);
        clearInterval(idle);
        resolve();
      });
      this.#closed = true;
      for (const hook of this.#closing.splice(0)) hook();
      this.server.closeIdleConnections();
    });
  }
}

/**
 * node:http's own clocks (docs/design/rules.md, "Request bodies"). `headersTimeout` answers slow headers
 * with 408. The body's clock is the adapters' read (RequestBodies), which answers in the envelope and
 * counts nothing; `requestTimeout`, from a request's first byte until its body is complete, only backs
 * it up for a body no handler reads (node:http would read and discard it to reuse the connection), so
 * it is longer than both. Both stop once the request has arrived: an SSE stream or a `Prefer: wait`
 * answer may take as long as it needs. The keep-alive timeout is what a load balancer in front must stay
 * under (docs/operations.md). Connections are checked against the clocks a few times per header timeout.
 */
function serverTimeouts(limits: HttpLimits) {
  return {
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.headersTimeoutMs + 2 * limits.bodyTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    connectionsCheckingInterval: Math.min(1000, Math.ceil(limits.headersTimeoutMs / 4)),
  };
}

/** One debug line per request, with the request id returned in X-Request-Id (ctx.log carries it). */
function accessLog(req: IncomingMessage, ctx: RequestContext): ResponseDone {
  return (route, status, seconds) =>
    ctx.log.debug({ method: req.method, route, path: ctx.path, status, durationMs: Math.round(seconds * 1e4) / 10 }, 'request completed');
}

/** The envelope for requests rejected by the HTTP parser itself (node:http would answer an empty body). */
function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  // As node:http itself does: answer only on a connection that has not written a response yet.
  if (err.code === 'ECONNRESET' || !socket.writable || Number((socket as { bytesWritten?: number }).bytesWritten ?? 0) > 0) {
    socket.destroy();
    return;
  }
  const status = err.code === 'HPE_HEADER_OVERFLOW' ? 431 : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
  const message =
    status === 431 ? 'the request headers are too large' : status === 408 ? 'the request took too long to arrive' : 'the request could not be parsed as HTTP';
  const body = JSON.stringify({ error: { code: 'invalid_request', message } });
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
      `Cache-Control: no-store\r\nX-Request-Id: ${randomUUID()}\r\nConnection: close\r\n\r\n${body}`,
  );
}
