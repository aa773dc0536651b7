import { createServer, type Server } from 'node:http';
import { waitFor } from './wait-for.ts';

/**
 * A local HTTP endpoint that holds every request to `/gate/<name>` until the test releases it, and
 * records the names in the order they arrived. A run whose `http.request` step calls it stays in flight
 * until released, so the order of arrivals is the order in which the runs were admitted and executed.
 */
export interface GateServer {
  /** The URL of the gate `name`. */
  url: (name: string) => string;
  /** The names in arrival order. */
  arrivals: string[];
  /** Resolves once `n` requests arrived (in total), with the arrivals so far. */
  arrived: (n: number, timeoutMs?: number) => Promise<string[]>;
  /** Answers the held request of `name`. */
  release: (name: string) => void;
  /** Answers every held request, and every later one at once. */
  openAll: () => void;
  close: () => Promise<void>;
}

export async function startGateServer(): Promise<GateServer> {
  const arrivals: string[] = [];
  const held = new Map<string, () => void>();
  let open = false;
  const server: Server = createServer((req, res) => {
    const name = decodeURIComponent((req.url ?? '').replace(/^\/gate\//, ''));
    arrivals.push(name);
    if (open) return void res.end('open');
    held.set(name, () => res.end('released'));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  return {
    url: (name) => `${base}/gate/${encodeURIComponent(name)}`,
    arrivals,
    arrived: (n, timeoutMs = 30_000) =>
      waitFor(`${n} requests at the gate (${arrivals.length} so far)`, () => arrivals.length >= n && [...arrivals], timeoutMs, 10),
    release: (name) => {
      const answer = held.get(name);
      if (!answer) throw new Error(`no request of ${name} is held (arrived: ${arrivals.join(', ')})`);
      held.delete(name);
      answer();
    },
    openAll: () => {
      open = true;
      for (const answer of held.values()) answer();
      held.clear();
    },
    close: async () => {
      open = true;
      for (const answer of held.values()) answer();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}
