import { fork, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { ChildMessage, ChildOptions, ChildReady, Command } from './shared.ts';

type Cmd = Command extends infer C ? (C extends { id: number } ? Omit<C, 'id'> : never) : never;

/** The driver's handle on a server child (bench/server.ts): start it, send commands, hear of terminal runs. */
export class ServerChild {
  readonly #proc: ChildProcess;
  readonly #pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  #next = 1;
  ready!: ChildReady;
  /** Requests aborted by the client mid-way (logged by the service as errors), counted, not printed. */
  abortedRequests = 0;
  onTerminal: (runs: { id: string; status: string }[]) => void = () => undefined;

  private constructor(proc: ChildProcess) {
    this.#proc = proc;
  }

  static async start(opts: ChildOptions): Promise<ServerChild> {
    const proc = fork(fileURLToPath(new URL('./server.ts', import.meta.url)), [], {
      execArgv: ['--import', 'tsx', '--expose-gc'],
      env: { ...process.env, BENCH_CHILD: JSON.stringify(opts) },
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    const child = new ServerChild(proc);
    // The service logs (JSON lines, LOG_LEVEL=warn) go to stderr, except requests the load generator
    // cut off when a step ended (autocannon drops its connections mid-request): those are only counted.
    for (const stream of [proc.stdout!, proc.stderr!]) {
      createInterface({ input: stream }).on('line', (line) => {
        if (line.includes('"ECONNRESET"') && line.includes('"message":"aborted"')) child.abortedRequests++;
        else process.stderr.write(`  [server] ${line}\n`);
      });
    }
    child.ready = await new Promise<ChildReady>((resolve, reject) => {
      proc.once('exit', (code) => reject(new Error(`bench server exited with code ${code} before it was ready`)));
      proc.on('message', (raw) => {
        const m = raw as ChildMessage;
        if (m.type === 'ready') resolve(m);
        else if (m.type === 'terminal') child.onTerminal(m.runs);
        else if (m.type === 'reply') {
          const p = child.#pending.get(m.id);
          child.#pending.delete(m.id);
          if (m.ok) p?.resolve(m.value);
          else p?.reject(new Error(`bench server: ${m.error}`));
        }
      });
    });
    proc.removeAllListeners('exit');
    proc.once('exit', (code) => {
      for (const p of child.#pending.values()) p.reject(new Error(`bench server exited (${code})`));
      child.#pending.clear();
    });
    return child;
  }

  get pid(): number {
    return this.ready.pid;
  }

  call<T = unknown>(cmd: Cmd): Promise<T> {
    const id = this.#next++;
    return new Promise<T>((resolve, reject) => {
      this.#pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.#proc.send({ ...cmd, id });
    });
  }

  sql<T = Record<string, unknown>>(text: string, params: unknown[] = []): Promise<T[]> {
    return this.call<T[]>({ cmd: 'sql', text, params });
  }

  async close(): Promise<void> {
    const exited = new Promise<void>((resolve) => this.#proc.once('exit', () => resolve()));
    await Promise.race([this.call({ cmd: 'close' }).catch(() => undefined), new Promise((r) => setTimeout(r, 10_000))]);
    const timer = setTimeout(() => this.#proc.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  }
}
