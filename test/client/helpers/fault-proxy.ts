import http, { type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A real HTTP proxy in front of a running service that injects the faults a client must survive, per
 * request: answer for the service (a 429 with Retry-After), forward the request but lose the response
 * (the connection drops after the service acted), or cut an SSE stream after some events, in the middle
 * of the next frame. Everything else is forwarded unchanged.
 */

export type Fault =
  | { kind: 'forward'; dropHeaders?: string[] }
  | { kind: 'respond'; status: number; headers?: Record<string, string>; body: unknown }
  | { kind: 'lose-response' }
  | { kind: 'cut-stream'; afterEvents: number };

export interface SeenRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

export interface FaultProxy {
  /** The proxy's `/v1` base URL. */
  base: string;
  requests: SeenRequest[];
  /** Decides each request's fault (default: forward); may wait before answering. */
  plan: (req: SeenRequest) => Fault | Promise<Fault>;
  close(): Promise<void>;
}

export async function startFaultProxy(target: string): Promise<FaultProxy> {
  const upstream = new URL(target);
  const proxy: FaultProxy = { base: '', requests: [], plan: () => ({ kind: 'forward' }), close: async () => undefined };
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const seen = { method: req.method!, path: req.url!, headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
    proxy.requests.push(seen);
    const fault = await proxy.plan(seen);
    if (fault.kind === 'respond') {
      res.writeHead(fault.status, { 'content-type': 'application/json', ...fault.headers });
      res.end(JSON.stringify(fault.body));
      return;
    }
    const headers: IncomingHttpHeaders = { ...req.headers, host: upstream.host };
    if (fault.kind === 'forward') for (const h of fault.dropHeaders ?? []) delete headers[h];
    const up = http.request({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers }, (upRes) => {
      if (fault.kind === 'lose-response') {
        upRes.resume();
        upRes.on('end', () => req.socket.destroy());
        return;
      }
      res.writeHead(upRes.statusCode!, upRes.headers);
      if (fault.kind === 'forward') {
        upRes.pipe(res);
        return;
      }
      let events = 0;
      let text = '';
      let cut = false;
      upRes.on('data', (chunk: Buffer) => {
        if (cut) return;
        if (events >= fault.afterEvents) {
          // Half of the next chunk (a frame cut in two), then the connection drops once the client
          // had time to read what came before (a reset discards what it has not read yet).
          cut = true;
          upRes.destroy();
          res.write(chunk.subarray(0, Math.max(1, Math.floor(chunk.length / 2))), () => setTimeout(() => req.socket.destroy(), 100));
          return;
        }
        res.write(chunk);
        text += chunk.toString('utf8');
        let end: number;
        while ((end = text.indexOf('\n\n')) >= 0) {
          if (text.slice(0, end).startsWith('id:')) events++;
          text = text.slice(end + 2);
        }
      });
      upRes.on('end', () => res.end());
    });
    up.on('error', () => req.socket.destroy());
    up.end(Buffer.concat(chunks));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  proxy.base = `http://127.0.0.1:${(server.address() as AddressInfo).port}${upstream.pathname.replace(/\/$/, '')}`;
  proxy.close = async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  };
  return proxy;
}
