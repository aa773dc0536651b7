import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { NODE_FLAGS, START_ENV } from '../src/build/output.ts';

/**
 * The production process as an operator runs it: the service built by `npm run build` and started as
 * `node dist/src/main.js`, no tsx. Used by the process part of `npm run bench` (bench/parts/process.ts).
 */

const REPO = fileURLToPath(new URL('../', import.meta.url));

/**
 * The output of `npm run build` (src/build/build.ts): dist/, built now so the bench measures the current
 * sources exactly as an operator would start them (`node dist/src/main.js`).
 */
export function compileService(): string {
  const built = spawnSync(process.execPath, [join(REPO, 'src/build/build.ts')], { cwd: REPO, stdio: ['ignore', 'ignore', 'inherit'] });
  if (built.status !== 0) throw new Error(`npm run build failed (exit ${built.status ?? built.signal})`);
  return join(REPO, 'dist');
}

export interface Started {
  proc: ChildProcess;
  url: string;
  /** Spawn → first 200 from /readyz. */
  readyMs: number;
  /** CPU time the process used until then (user + system): what the start costs on a machine shared with other work. */
  readyCpuMs: number;
  /** Everything the process printed, for a failure message. */
  output: () => string;
}

/**
 * Starts `node <options> <compiled>/src/main.js` (the production start's options and environment by
 * default; `env` adds to it or overrides) and waits for /readyz to answer 200.
 */
export async function startCompiled(compiled: string, env: Record<string, string>, execArgv: string[] = NODE_FLAGS): Promise<Started> {
  const t0 = performance.now();
  const proc = spawn(process.execPath, [...execArgv, join(compiled, 'src/main.js')], {
    cwd: compiled,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', PORT: '0', LOG_LEVEL: 'warn', ...START_ENV, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let text = '';
  proc.stdout!.on('data', (b: Buffer) => (text += b.toString()));
  proc.stderr!.on('data', (b: Buffer) => (text += b.toString()));
  const output = () => text;
  const exited = new Promise<never>((_, reject) => proc.once('exit', (code) => reject(new Error(`service exited (${code}):\n${text}`))));
  const url = await Promise.race([
    exited,
    new Promise<string>((resolve) => {
      const look = () => {
        const m = /listening on (http:\/\/\S+)/.exec(text);
        if (m) resolve(m[1]!);
        else setTimeout(look, 5);
      };
      look();
    }),
  ]);
  for (;;) {
    const ok = await fetch(`${url}/readyz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    await Promise.race([exited, new Promise((r) => setTimeout(r, 10))]);
  }
  const readyMs = performance.now() - t0;
  const readyCpuMs = cpuMs(proc.pid!);
  exited.catch(() => undefined);
  return { proc, url, readyMs, readyCpuMs, output };
}

/** User + system CPU time of a process, from /proc (Linux; clock ticks of 10 ms). */
export function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/** Resident set size of a process, from /proc (Linux). */
export function rssBytes(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : NaN;
}

/** V8 heap used, from the service's own /metrics (prom-client's default process metrics). */
export async function heapUsedBytes(url: string): Promise<number> {
  const text = await fetch(`${url}/metrics`).then((r) => r.text());
  const m = /^nodejs_heap_size_used_bytes (\S+)$/m.exec(text);
  return m ? Number(m[1]) : NaN;
}

export async function stopService(s: Started): Promise<void> {
  if (s.proc.exitCode !== null) return;
  const gone = new Promise((r) => s.proc.once('exit', r));
  s.proc.kill('SIGTERM');
  const force = setTimeout(() => s.proc.kill('SIGKILL'), 10_000);
  await gone;
  clearTimeout(force);
}
