import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Logger } from '../logger.ts';
import { ApiError } from '../domain/errors.ts';
import { sendError } from './respond.ts';

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
}

interface Mount {
  match: (path: string) => boolean;
  handler: Handler;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

export class HttpServer {
  readonly server: Server;
  readonly #mounts: Mount[] = [];
  readonly #log: Logger;

  constructor(log: Logger) {
    this.#log = log;
    this.server = createServer({ keepAliveTimeout: 65_000, requestTimeout: 0 }, (req, res) => void this.#dispatch(req, res));
    // SSE streams are long-lived; the per-socket timeout must not cut them.
    this.server.headersTimeout = 30_000;
    this.server.timeout = 0;
  }

  mount(prefix: string | ((path: string) => boolean), handler: Handler): void {
    const match =
      typeof prefix === 'function' ? prefix : (path: string) => path === prefix || path.startsWith(prefix.endsWith('/') ? prefix : `${prefix}/`);
    this.#mounts.push({ match, handler });
  }

  async #dispatch(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const incoming = req.headers['x-request-id'];
    const requestId = typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    res.setHeader('X-Request-Id', requestId);
    const url = new URL(req.url ?? '/', 'http://localhost');
    const ctx: RequestContext = { requestId, path: url.pathname, url, log: this.#log.child({ requestId }) };
    try {
      const mount = this.#mounts.find((m) => m.match(url.pathname));
      if (!mount) throw new ApiError('not_found', `no route for ${req.method} ${url.pathname}`);
      await mount.handler(req, res, ctx);
    } catch (err) {
      if (!(err instanceof ApiError)) ctx.log.error({ err }, 'request failed');
      if (!res.headersSent) sendError(res, err);
      else res.destroy();
    }
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
      const force = setTimeout(() => this.server.closeAllConnections(), graceMs);
      force.unref();
      this.server.close(() => {
        clearTimeout(force);
        resolve();
      });
      this.server.closeIdleConnections();
    });
  }
}
