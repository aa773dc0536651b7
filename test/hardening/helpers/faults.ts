import { spawn, type ChildProcess } from 'node:child_process';
import * as assert from 'uvu/assert';

/**
 * Shared by test/hardening/faults.test.ts: a real service process (src/main.ts), a tolerant HTTP client
 * for it, bounded polling, the fault catalogs, and the checks every fault ends with (a run's event log is
 * sound; money is counted in micro-dollars).
 */

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export { waitFor } from '../../helpers/wait-for.ts';

export interface Service {
  child: ChildProcess;
  url: Promise<string>;
  /** The last 20 kB the process printed (stdout and stderr), for failure messages. */
  output(): string;
  alive(): boolean;
  kill(): Promise<void>;
}

export interface Spawned {
  child: ChildProcess;
  /** What it printed (stdout and stderr), trimmed to the last 20–40 kB. */
  output(): string;
  exit: Promise<void>;
  alive(): boolean;
}

/** `node --import tsx <script>` with `env` on top of this process's environment, its output kept. */
export function spawnTsx(script: string, env: Record<string, string>): Spawned {
  const child = spawn(process.execPath, ['--import', 'tsx', script], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let exited = false;
  const append = (b: Buffer) => {
    out += b.toString();
    if (out.length > 40_000) out = out.slice(-20_000);
  };
  child.stdout!.on('data', append);
  child.stderr!.on('data', append);
  const exit = new Promise<void>((r) => child.once('exit', () => ((exited = true), r())));
  return { child, output: () => out, exit, alive: () => !exited && child.exitCode === null && child.signalCode === null };
}

/** `src/main.ts` in its own process (PORT=0), as an operator starts it. */
export function bootService(env: Record<string, string>): Service {
  const { child, output, exit, alive } = spawnTsx('src/main.ts', { PORT: '0', LOG_LEVEL: 'warn', ...env });
  const url = new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the service printed no listening line within 60 s:\n${output().slice(-4000)}`)), 60_000);
    const look = () => {
      const m = /listening on (http:\/\/\S+)/.exec(output());
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    };
    child.stdout!.on('data', look);
    void exit.then(() => {
      clearTimeout(timer);
      reject(new Error(`the service exited (${child.exitCode ?? child.signalCode}):\n${output().slice(-4000)}`));
    });
  });
  url.catch(() => undefined);
  return {
    child,
    url,
    output: () => output().slice(-20_000),
    alive,
    async kill() {
      if (alive()) child.kill('SIGKILL');
      await Promise.race([exit, sleep(5_000)]);
    },
  };
}

export interface Reply {
  /** -1: no HTTP answer at all (connection refused or reset, timeout). */
  status: number;
  body: any;
  text: string;
}

/** One request; never throws (a failed connection is status -1, with the error as text). */
export async function request(
  url: string,
  method: string,
  path: string,
  o: { key?: string; body?: unknown; headers?: Record<string, string>; timeoutMs?: number } = {},
): Promise<Reply> {
  const headers: Record<string, string> = { ...o.headers };
  if (o.key) headers.authorization = `Bearer ${o.key}`;
  if (o.body !== undefined) headers['content-type'] = 'application/json';
  try {
    const res = await fetch(`${url}${path}`, {
      method,
      headers,
      body: o.body === undefined ? undefined : JSON.stringify(o.body),
      signal: AbortSignal.timeout(o.timeoutMs ?? 20_000),
    });
    const text = await res.text();
    let body: unknown;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      body = undefined;
    }
    return { status: res.status, body, text };
  } catch (err) {
    // No HTTP answer: refused, reset, or (a hung service) none within the timeout.
    return { status: -1, body: undefined, text: `no answer: ${String((err as Error).cause ?? err)}` };
  }
}

export const TERMINAL = ['completed', 'failed', 'cancelled'];

/** Exact micro-dollars of a numeric(18,6) value (string or number). */
export function micros(v: unknown): number {
  const s = String(v);
  const m = /^(-?)(\d+)(?:\.(\d{1,6}))?$/.exec(s);
  if (!m) throw new Error(`not a 6-place decimal: ${s}`);
  const n = Number(m[2]) * 1_000_000 + Number((m[3] ?? '').padEnd(6, '0'));
  return m[1] ? -n : n;
}

export interface EventRow {
  sequence: number;
  type: string;
  nodeId: string | null;
}

/**
 * A finished run's log is sound: sequences 1..n without gaps or repeats, exactly one terminal event and
 * it is the last, and `node.started` / `node.completed` each appear exactly once for exactly the nodes
 * expected (steps and delays start; steps, delays, conditions and outputs complete).
 */
export function assertRunLog(runId: string, events: EventRow[], terminal: string, nodes: { started: string[]; completed: string[] }): void {
  const seqs = events.map((e) => e.sequence);
  assert.equal(
    seqs,
    events.map((_, i) => i + 1),
    `run ${runId}: event sequences are not 1..n: ${seqs.join(',')}`,
  );
  const terminals = events.filter((e) => ['run.completed', 'run.failed', 'run.cancelled'].includes(e.type));
  assert.equal(
    terminals.map((e) => e.type),
    [terminal],
    `run ${runId}: terminal events ${terminals.map((e) => e.type).join(',') || 'none'}`,
  );
  assert.is(events.at(-1)!.type, terminal, `run ${runId}: the terminal event is not the last one`);
  for (const [type, expected] of [
    ['node.started', nodes.started],
    ['node.completed', nodes.completed],
  ] as const) {
    const seen = events
      .filter((e) => e.type === type)
      .map((e) => e.nodeId!)
      .sort();
    assert.equal(seen, [...expected].sort(), `run ${runId}: ${type} for [${seen.join(',')}], expected each of [${expected.join(',')}] once`);
  }
}

/** `?` placeholders (MikroORM's) to `$n` (node-postgres'). */
export function dollarParams(sql: string): string {
  let i = 0;
  return sql.replace(/\?/g, () => `$${++i}`);
}
