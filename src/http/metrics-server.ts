import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { HttpServer } from './server.ts';
import type { Logger } from '../logger.ts';
import { bindQueueSource, type QueueReader } from '../observability/deployment-metrics.ts';
import { collectProcessMetrics, registry } from '../observability/metrics.ts';

/**
 * `GET /metrics` in the Prometheus text format, without an API key (like /healthz): on the API port,
 * or with METRICS_PORT on a port of its own (and then not on the API port). docs/operations.md lists
 * the series.
 */

export const METRICS_PATH = '/metrics';

async function serveMetrics(req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.writeHead(405, { Allow: 'GET, HEAD', 'Content-Type': 'text/plain; charset=utf-8' });
    res.end('GET /metrics\n');
    return;
  }
  const text = await registry.metrics();
  res.writeHead(200, { 'Content-Type': registry.contentType, 'Cache-Control': 'no-store' });
  res.end(req.method === 'HEAD' ? undefined : text);
}

export interface MetricsEndpoint {
  /** The separate server's bound URL root (with METRICS_PORT), else null. */
  listen(): Promise<string | null>;
  close(): Promise<void>;
}

export interface MetricsOptions {
  /** The run queue's reader (deployment-wide gauges) and RUN_CAPACITY; absent in a process without a database. */
  queue?: { read: QueueReader; capacity: number };
  /** METRICS_PORT: a separate listener; undefined mounts /metrics on `http`. */
  port?: number;
  host: string;
  /** The API server to mount on when there is no METRICS_PORT. */
  http?: HttpServer;
  log: Logger;
}

export function createMetricsEndpoint(opts: MetricsOptions): MetricsEndpoint {
  collectProcessMetrics();
  const unbind = opts.queue ? bindQueueSource(opts.queue.read, opts.queue.capacity) : () => undefined;
  let server: Server | null = null;
  if (opts.port === undefined) {
    opts.http?.mount(METRICS_PATH, (req, res) => serveMetrics(req, res));
  } else {
    server = createServer((req, res) => {
      const path = (req.url ?? '/').split('?')[0];
      if (path !== METRICS_PATH) {
        res.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8' });
        res.end('only GET /metrics is served on this port\n');
        return;
      }
      serveMetrics(req, res).catch((err: unknown) => {
        opts.log.error({ err }, 'metrics scrape failed');
        if (!res.headersSent) res.writeHead(500);
        res.end();
      });
    });
  }
  return {
    listen() {
      const s = server;
      if (!s) return Promise.resolve(null);
      return new Promise((resolve, reject) => {
        s.once('error', reject);
        s.listen(opts.port, opts.host, () => {
          s.off('error', reject);
          const addr = s.address();
          const port = typeof addr === 'object' && addr ? addr.port : opts.port;
          const host = opts.host === '0.0.0.0' || opts.host === '::' ? '127.0.0.1' : opts.host;
          resolve(`http://${host.includes(':') ? `[${host}]` : host}:${port}`);
        });
      });
    },
    async close() {
      unbind();
      const s = server;
      if (!s?.listening) return;
      await new Promise<void>((resolve) => {
        s.close(() => resolve());
        s.closeAllConnections();
      });
    },
  };
}
