import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resetDb, testOrm } from './db.ts';

/** `npm start` / `npm run catalog` as real child processes of the test (src/main.ts, src/catalog/cli.ts). */

export interface ServiceProcess {
  child: ChildProcess;
  /** The URL root once the process printed its listening line. */
  url: Promise<string>;
  output: () => string;
  /** SIGTERM (SIGKILL if it has not exited 30 s later), then the exit code. */
  stop: () => Promise<number | null>;
}

export interface StartOptions {
  /** The entry point; default src/main.ts (`npm start`). */
  entry?: string;
  /** The whole command instead (e.g. `npm start`, `node dist/src/main.js`); default node through tsx on `entry`. */
  command?: [string, ...string[]];
  /** The line that says the process is up; its first group (or the whole match) is what `url` resolves to. */
  ready?: RegExp;
  /** How long the ready line may take; default 60 s. */
  upWithinMs?: number;
  /** More `node` options, after `--import tsx` (e.g. another `--import`). */
  nodeOptions?: string[];
}

export function startService(env: Record<string, string>, opts: StartOptions = {}): ServiceProcess {
  const ready = opts.ready ?? /listening on (http:\/\/[^\s]+)/;
  const [file, ...args] = opts.command ?? [process.execPath, '--import', 'tsx', ...(opts.nodeOptions ?? []), opts.entry ?? 'src/main.ts'];
  const child = spawn(file, args, {
    env: { ...process.env, PORT: '0', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  const url = new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ready line (${ready}) in time:\n${out}`)), opts.upWithinMs ?? 60_000);
    const onData = (b: Buffer) => {
      out += b.toString();
      const m = ready.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1] ?? m[0]);
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (b: Buffer) => (out += b.toString()));
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`exited ${code} before it was up:\n${out}`));
    });
  });
  url.catch(() => undefined);
  return {
    child,
    url,
    output: () => out,
    stop: () => {
      child.kill('SIGTERM');
      // A process stopped before it installed its own handlers may keep running (the Temporal SDK's
      // runtime takes SIGTERM to drain workers it has not started yet).
      const kill = setTimeout(() => child.kill('SIGKILL'), 30_000);
      return exited.finally(() => clearTimeout(kill));
    },
  };
}

/** Runs an entry point to its end: exit code, stdout and stderr. */
export function runToEnd(
  args: string[],
  env: Record<string, string>,
  timeoutMs = 60_000,
): Promise<{ code: number | null; stdout: string; stderr: string; ms: number }> {
  const started = Date.now();
  const child = spawn(process.execPath, ['--import', 'tsx', ...args], {
    env: { ...process.env, LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
  child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  return new Promise((resolve) =>
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, ms: Date.now() - started });
    }),
  );
}

/**
 * `npm start` on a fresh database (demo catalog, embedded engine): embedded PGlite in a directory of its
 * own, or, with DATABASE_URL, the test database emptied first (the service then shares it). `base` is
 * its `/v1` URL; `stop` ends it and removes the directory.
 */
export async function startDemoService(env: Record<string, string> = {}, opts: StartOptions = {}): Promise<{ base: string; stop: () => Promise<void> }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'wr-demo-'));
  if (process.env.DATABASE_URL) await resetDb(await testOrm());
  const svc = startService({ DATA_DIR: dataDir, LOG_LEVEL: 'warn', ...env }, opts);
  const stop = async () => {
    await svc.stop();
    rmSync(dataDir, { recursive: true, force: true });
  };
  try {
    return { base: `${await svc.url}/v1`, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
