import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { EventSource } from 'eventsource';
import type { E2e, PublicEvent } from './harness.ts';

/** Every event type the service emits (EventSource hands out named events only to their listeners). */
export const EVENT_TYPES = [
  'run.queued',
  'run.preparing',
  'run.started',
  'node.started',
  'node.output.delta',
  'node.completed',
  'node.failed',
  'node.skipped',
  'run.suspended',
  'run.resumed',
  'run.completed',
  'run.failed',
  'run.cancelled',
];
const TERMINAL_EVENTS = ['run.completed', 'run.failed', 'run.cancelled'];

export interface Stream {
  snapshot: any;
  /** The event frames in arrival order: SSE id and the parsed RunEvent. */
  frames: { id: string; type: string; event: PublicEvent }[];
  /** How many times the connection opened (1 unless the client had to reconnect). */
  opens: number;
}

/**
 * Follows GET /runs/{id}/stream with a real SSE client (the `eventsource` package) until the terminal
 * event; rejects after `timeoutMs`.
 */
export function followStream(e: E2e, runId: string, timeoutMs: number, key = 'wr_test_bob'): Promise<Stream> {
  const stream: Stream = { snapshot: null, frames: [], opens: 0 };
  const es = new EventSource(`${e.t.base}/runs/${runId}/stream`, {
    fetch: (input, init) => fetch(input, { ...init, headers: { ...init?.headers, authorization: `Bearer ${key}` } }),
  });
  return new Promise<Stream>((resolve, reject) => {
    const timer = setTimeout(() => {
      es.close();
      reject(
        new Error(`[${e.engine.name}] the stream of ${runId} saw no terminal event in ${timeoutMs} ms (got ${stream.frames.map((f) => f.type).join(', ')})`),
      );
    }, timeoutMs);
    es.addEventListener('open', () => stream.opens++);
    es.addEventListener('snapshot', (ev: MessageEvent) => {
      stream.snapshot ??= JSON.parse(ev.data);
    });
    for (const type of EVENT_TYPES) {
      es.addEventListener(type, (ev: MessageEvent) => {
        stream.frames.push({ id: ev.lastEventId, type, event: JSON.parse(ev.data) });
        if (TERMINAL_EVENTS.includes(type)) {
          clearTimeout(timer);
          es.close();
          resolve(stream);
        }
      });
    }
  });
}

const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));

/**
 * `npm run worker` in a child process (node --import tsx src/worker.ts) on the app's database, task
 * queue and encryption key; resolves once it reports that it runs. `stop()` sends SIGTERM and waits.
 */
export async function spawnWorker(env: Record<string, string>, timeoutMs: number): Promise<{ child: ChildProcess; stop(): Promise<void> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/worker.ts'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the worker did not start in ${timeoutMs} ms:\n${output.slice(-4000)}`)), timeoutMs);
    const onData = (chunk: Buffer) => {
      output = (output + chunk.toString('utf8')).slice(-20_000); // read on: a full pipe would stall the child
      if (output.includes('temporal worker running')) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`the worker exited (${code}) before it ran:\n${output.slice(-4000)}`));
    });
  });
  return {
    child,
    async stop() {
      if (child.exitCode !== null) return;
      child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), 20_000);
      await exited;
      clearTimeout(killer);
    },
  };
}
