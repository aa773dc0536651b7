import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** The `wr` CLI as a real child process: node_modules/.bin/wr, what `npx wr` runs. */

export const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const BIN = `${ROOT}node_modules/.bin/wr`;

export interface WrResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface WrOptions {
  /** The service's `/v1` base URL (WR_BASE_URL). */
  base: string;
  env?: Record<string, string | undefined>;
  /** The Node binary (default: this one). */
  node?: string;
  /** Called with everything written so far, on every chunk of stdout or stderr. */
  onOutput?: (out: { stdout: string; stderr: string }, child: ChildProcess) => void;
}

/** Runs `wr ARGS` with the demo key and no colours, to its end (killed after a minute). */
export function wr(args: string[], opts: WrOptions): Promise<WrResult> {
  const env: Record<string, string | undefined> = { ...process.env, WR_API_KEY: 'wr_demo_key', WR_BASE_URL: opts.base, NO_COLOR: '1', ...opts.env };
  for (const k of Object.keys(env)) if (env[k] === undefined) delete env[k];
  const child = spawn(opts.node ?? process.execPath, [BIN, ...args], { cwd: ROOT, env: env as NodeJS.ProcessEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  const out = { stdout: '', stderr: '' };
  child.stdout.on('data', (b: Buffer) => {
    out.stdout += b.toString();
    opts.onOutput?.(out, child);
  });
  child.stderr.on('data', (b: Buffer) => {
    out.stderr += b.toString();
    opts.onOutput?.(out, child);
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  return new Promise((resolve) =>
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, ...out });
    }),
  );
}

export const lines = (s: string) => s.split('\n').filter((l) => l.trim() !== '');
