import autocannon from 'autocannon';
import { Agent, request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { summarise, wallNow } from './shared.ts';

/**
 * Load generators: autocannon for open request loops (latencies taken from its per-response hrtime
 * durations, so they keep sub-millisecond resolution), a closed loop of run submissions for the
 * end-to-end benchmark, and raw-socket SSE clients (the cheapest possible reader of 10 000 streams).
 */

export interface LoadResult {
  /** 2xx responses per second over the measured duration. */
  rps: number;
  p50: number;
  p99: number;
  ok: number;
  /** Non-2xx responses, errors and timeouts. */
  failed: number;
  statuses: Record<string, number>;
}

export async function hammer(opts: {
  url: string;
  connections: number;
  seconds: number;
  method?: 'GET' | 'POST';
  headers?: Record<string, string>;
  body?: string;
  idReplacement?: boolean;
}): Promise<LoadResult> {
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  const instance = autocannon({
    url: opts.url,
    connections: opts.connections,
    duration: opts.seconds,
    method: opts.method ?? 'GET',
    headers: opts.headers,
    body: opts.body,
    idReplacement: opts.idReplacement,
    timeout: 30,
  });
  instance.on('response', (_client: unknown, status: number, _bytes: number, ms: number) => {
    statuses[status] = (statuses[status] ?? 0) + 1;
    if (status >= 200 && status < 300) latencies.push(ms);
  });
  const result = await instance;
  const s = summarise(latencies);
  return {
    rps: s.n / Math.max(0.001, result.duration),
    p50: s.p50,
    p99: s.p99,
    ok: s.n,
    failed: result.non2xx + result.errors + result.timeouts,
    statuses,
  };
}

// ---------------------------------------------------------------------------------------------------
// Plain requests (setup and the closed loop)

const agent = new Agent({ keepAlive: true, maxSockets: 256 });

export function httpJson(method: string, url: string, opts: { key?: string; body?: unknown } = {}): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const text = opts.body === undefined ? undefined : JSON.stringify(opts.body);
    const req = request(
      url,
      {
        method,
        agent,
        headers: {
          ...(opts.key ? { authorization: `Bearer ${opts.key}` } : {}),
          ...(text ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) } : {}),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const raw = Buffer.concat(chunks).toString('utf8');
          let body: unknown = raw;
          try {
            body = raw ? JSON.parse(raw) : null;
          } catch {
            /* not JSON */
          }
          resolve({ status: res.statusCode ?? 0, body });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(text);
  });
}

/** Runs `fn` over `items` with at most `limit` in flight. */
export async function pool<T, R>(items: T[], limit: number, fn: (item: T, i: number) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

// ---------------------------------------------------------------------------------------------------
// Closed loop: `users` clients each submit a run, wait until it is terminal, submit the next.

export interface Waiter {
  /** Resolves with the terminal status once the server child reports the run terminal, or `timeout`. */
  wait(runId: string, timeoutMs?: number): Promise<string>;
  /** Feed from ServerChild.onTerminal. */
  done(runs: { id: string; status: string }[]): void;
}

export function terminalWaiter(): Waiter {
  const waiting = new Map<string, (status: string) => void>();
  const early = new Map<string, string>();
  return {
    wait(runId, timeoutMs = 30_000) {
      const status = early.get(runId);
      if (status !== undefined) {
        early.delete(runId);
        return Promise.resolve(status);
      }
      return new Promise((resolve) => {
        const timer = setTimeout(() => {
          waiting.delete(runId);
          resolve('timeout');
        }, timeoutMs);
        waiting.set(runId, (s) => {
          clearTimeout(timer);
          resolve(s);
        });
      });
    },
    done(runs) {
      for (const r of runs) {
        const w = waiting.get(r.id);
        if (w) {
          waiting.delete(r.id);
          w(r.status);
        } else early.set(r.id, r.status);
      }
    },
  };
}

export interface ClosedLoopResult {
  runIds: string[];
  statuses: Record<string, number>;
  /** Client side: 202 received → terminal reported (includes the harness's terminal detection, about 1 ms). */
  clientMs: number[];
  /** POST /runs latency inside the loop. */
  postMs: number[];
  seconds: number;
  rejected: number;
}

export async function closedLoop(opts: {
  users: number;
  seconds: number;
  submit: () => Promise<{ status: number; body: any }>;
  waiter: Waiter;
}): Promise<ClosedLoopResult> {
  const end = performance.now() + opts.seconds * 1000;
  const runIds: string[] = [];
  const statuses: Record<string, number> = {};
  const clientMs: number[] = [];
  const postMs: number[] = [];
  let rejected = 0;
  const t0 = performance.now();
  let lastDone = t0;
  const user = async () => {
    while (performance.now() < end) {
      const sent = performance.now();
      const res = await opts.submit();
      if (sent < end) postMs.push(performance.now() - sent);
      if (res.status !== 202) {
        rejected++;
        await new Promise((r) => setTimeout(r, 50));
        continue;
      }
      const accepted = performance.now();
      const id = String(res.body.run.id);
      const status = await opts.waiter.wait(id);
      lastDone = performance.now();
      // Only runs submitted and finished inside the window count.
      if (lastDone <= end) {
        runIds.push(id);
        statuses[status] = (statuses[status] ?? 0) + 1;
        clientMs.push(lastDone - accepted);
      }
    }
  };
  await Promise.all(Array.from({ length: opts.users }, user));
  return { runIds, statuses, clientMs, postMs, seconds: (end - t0) / 1000, rejected };
}

// ---------------------------------------------------------------------------------------------------
// SSE over raw sockets

export interface SseClient {
  socket: Socket;
  /** Wall time at which each live marker was first seen on this stream. */
  seen: Map<string, number>;
}

/**
 * Opens a stream and resolves once the first frame (`event: snapshot`) arrived. Markers are
 * `bench-live-<n>` strings inside later frames; their arrival time is recorded per stream.
 */
export function openSse(port: number, path: string, key: string | null): Promise<SseClient> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    socket.setNoDelay(true);
    socket.setEncoding('utf8');
    const client: SseClient = { socket, seen: new Map() };
    let head = '';
    let open = false;
    let tail = '';
    const fail = (err: Error) => {
      socket.destroy();
      reject(err);
    };
    socket.on('error', (err) => {
      if (!open) fail(err);
    });
    socket.on('data', (chunk: string) => {
      if (!open) {
        head += chunk;
        if (!head.startsWith('HTTP/1.1 200')) {
          if (head.includes('\r\n\r\n'))
            fail(new Error(`stream refused: ${head.split('\r\n')[0]} ${head.slice(head.indexOf('\r\n\r\n') + 4, head.indexOf('\r\n\r\n') + 200)}`));
          return;
        }
        if (!head.includes('event: snapshot')) return;
        open = true;
        head = '';
        resolve(client);
        return;
      }
      const text = tail + chunk;
      if (text.includes('bench-live-')) {
        const at = wallNow();
        for (const m of text.matchAll(/bench-live-\d+-[0-9a-f]+/g)) if (!client.seen.has(m[0])) client.seen.set(m[0], at);
      }
      tail = text.slice(-32);
    });
    socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAccept: text/event-stream\r\n${key ? `Authorization: Bearer ${key}\r\n` : ''}\r\n`);
  });
}

/** A follower of one run's stream, as a client of the API sees it. */
export interface RunStreamClient {
  /** Wall clock (ms) when the snapshot arrived: events written after it reach the client live. */
  openedAt: number;
  /** The events received, in order (the replay and the live ones): sequence, `ts` and arrival (wall clock, ms). */
  sequences: number[];
  written: number[];
  arrived: number[];
  /** Resolves when the response ends (after the terminal event) or fails. */
  ended: Promise<void>;
  close(): void;
}

/**
 * GET /runs/{id}/stream through node:http (which undoes the chunked framing), resolved once the snapshot
 * arrived; each later `id:`/`data:` frame is parsed for its sequence and `ts`.
 */
export function followRunStream(port: number, path: string, key: string): Promise<RunStreamClient> {
  return new Promise((resolve, reject) => {
    let endStream!: () => void;
    const client: RunStreamClient = {
      openedAt: NaN,
      sequences: [],
      written: [],
      arrived: [],
      ended: new Promise<void>((r) => (endStream = r)),
      close: () => req.destroy(),
    };
    let buffer = '';
    const req = request({ host: '127.0.0.1', port, path, agent: false, headers: { accept: 'text/event-stream', authorization: `Bearer ${key}` } }, (res) => {
      if (res.statusCode !== 200) {
        reject(new Error(`stream refused: ${res.statusCode}`));
        res.resume();
        return;
      }
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        const at = wallNow();
        buffer += chunk;
        for (let cut = buffer.indexOf('\n\n'); cut >= 0; cut = buffer.indexOf('\n\n')) {
          const frame = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          if (frame.startsWith('event: snapshot')) {
            client.openedAt = at;
            resolve(client);
            continue;
          }
          const data = frame.indexOf('\ndata: ');
          if (frame.startsWith(':') || data < 0) continue;
          const event = JSON.parse(frame.slice(data + 7)) as { sequence: number; ts: string };
          client.sequences.push(event.sequence);
          client.written.push(Date.parse(event.ts));
          client.arrived.push(at);
        }
      });
      res.on('end', endStream);
      res.on('error', endStream);
    });
    req.on('error', (err) => {
      reject(err);
      endStream();
    });
    req.end();
  });
}
