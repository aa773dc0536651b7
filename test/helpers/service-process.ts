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
  /** SIGTERM, then the exit code. */
  stop: () => Promise<number | null>;
}

export function startService(env: Record<string, string>): ServiceProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    env: { ...process.env, PORT: '0', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  const url = new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no listening line in time:\n${out}`)), 60_000);
    const onData = (b: Buffer) => {
      out += b.toString();
      const m = /listening on (http:\/\/[^\s]+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (b: Buffer) => (out += b.toString()));
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`exited ${code} before listening:\n${out}`));
    });
  });
  url.catch(() => undefined);
  return {
    child,
    url,
    output: () => out,
    stop: () => {
      child.kill('SIGTERM');
      return exited;
    },
  };
}

/** Runs an entry point to its end: exit code, stdout and stderr. */
export function runToEnd(args: string[], env: Record<string, string>, timeoutMs = 60_000): Promise<{ code: number | null; stdout: string; stderr: string; ms: number }> {
  const started = Date.now();
  const child = spawn(process.execPath, ['--import', 'tsx', ...args], { env: { ...process.env, LOG_LEVEL: 'info', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
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
export async function startDemoService(): Promise<{ base: string; stop: () => Promise<void> }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'wr-demo-'));
  if (process.env.DATABASE_URL) await resetDb(await testOrm());
  const svc = startService({ DATA_DIR: dataDir, LOG_LEVEL: 'warn' });
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
