import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { waitFor } from '../helpers/wait-for.ts';

/**
 * A supervisor that restarts the server the moment it was killed (`kill -9`, then start at once) meets a
 * holder that still exists: the killed process stays a zombie until its parent reaps it. The server here
 * runs under a parent that never reaps (a shell that `exec`s `sleep`), so every restart happens while
 * the killed server is a zombie; each restart must come up on the same DATA_DIR, and every run that was
 * in flight at a kill must still end, once.
 */

const DELAY_WORKFLOW = '00000000-0000-4000-8000-00000000f004';
const KEY = 'wr_demo_key';
const ROUNDS = 3;

interface UnreapedServer {
  /** The non-reaping parent (the shell, then `sleep`). */
  parent: ChildProcess;
  pid: Promise<number>;
  url: Promise<string>;
}

/** `npm start` as the child of a process that never waits for it, so its death leaves a zombie. */
function startUnreaped(env: Record<string, string>): UnreapedServer {
  const parent = spawn('sh', ['-c', '"$0" --import tsx src/main.ts & echo "server pid $!"; exec sleep 600', process.execPath], {
    env: { ...process.env, PORT: '0', LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const waiters: Array<() => void> = [];
  parent.stdout!.on('data', (chunk: Buffer) => {
    out += chunk.toString();
    for (const check of waiters) check();
  });
  parent.stderr!.on('data', (chunk: Buffer) => {
    out += chunk.toString();
    for (const check of waiters) check();
  });
  const seen = (pattern: RegExp) =>
    new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no ${pattern} in time:\n${out}`)), 120_000);
      waiters.push(() => {
        const match = pattern.exec(out);
        if (match) {
          clearTimeout(timer);
          resolve(match[1]!);
        } else if (/is in use by process/.test(out)) {
          // The refusal this test is about: the server exits 2 with one line, and no listening line follows.
          clearTimeout(timer);
          reject(new Error(out));
        }
      });
    });
  const url = seen(/listening on (http:\/\/\S+)/);
  url.catch(() => undefined);
  return { parent, pid: seen(/server pid (\d+)/).then(Number), url };
}

/** The state letter of /proc/<pid>/stat, or undefined once the process is reaped. */
function processState(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
  } catch {
    return undefined;
  }
}

async function api(url: string, path: string, init: RequestInit = {}): Promise<any> {
  const res = await fetch(`${url}/v1${path}`, { ...init, headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', ...init.headers } });
  return res.json();
}

test('kill -9 and an immediate start, several times in a row: the server always comes up and every run in flight ends once', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'wr-kill-restart-'));
  const env = { DATA_DIR: dir, DATABASE_URL: '' };
  const started: UnreapedServer[] = [];
  try {
    const runIds: string[] = [];
    let server = startUnreaped(env);
    started.push(server);
    for (let round = 0; round < ROUNDS; round++) {
      const url = await server.url;
      const accepted = await api(url, '/runs', { method: 'POST', body: JSON.stringify({ workflow: DELAY_WORKFLOW, inputs: {} }) });
      const id = accepted.run.id as string;
      runIds.push(id);
      await waitFor('the run to be in flight on its delay', async () => (await api(url, `/runs/${id}`)).status === 'suspended', 10_000, 100);

      const pid = await server.pid;
      process.kill(pid, 'SIGKILL');
      await waitFor(`process ${pid} to die`, () => processState(pid) === 'Z', 5_000, 5);
      server = startUnreaped(env);
      started.push(server);
      await server.url;
      assert.is(processState(pid), 'Z', 'the killed server was still a zombie while its successor came up');
    }

    const url = await server.url;
    for (const id of runIds) {
      const done = await waitFor(
        `run ${id} to end`,
        async () => {
          const run = await api(url, `/runs/${id}`);
          return ['completed', 'failed', 'cancelled'].includes(run.status) && run;
        },
        30_000,
        200,
      );
      assert.is(done.status, 'completed', JSON.stringify(done));
      const events = (await api(url, `/runs/${id}/events`)).events as any[];
      assert.equal(
        events.map((e) => e.sequence),
        events.map((_, i) => i + 1),
      );
      const completedNodes = events.filter((e) => e.type === 'node.completed').map((e) => e.nodeId);
      assert.is(new Set(completedNodes).size, completedNodes.length, `a node completed twice: ${completedNodes}`);
      assert.is(events.filter((e) => e.type === 'run.completed').length, 1);
    }
  } finally {
    for (const each of started) {
      const pid = await each.pid.catch(() => undefined);
      if (pid !== undefined && processState(pid) !== undefined && processState(pid) !== 'Z') process.kill(pid, 'SIGKILL');
      // Ending the parent hands its zombie to init, which reaps it.
      each.parent.kill('SIGKILL');
    }
    rmSync(dir, { recursive: true, force: true });
  }
});

test.run();
