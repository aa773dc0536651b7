import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { waitFor } from '../helpers/wait-for.ts';

/**
 * Durability of the embedded engine across `kill -9`: the real server process is killed while a run is
 * suspended on its delay node, started again on the same database, and the run finishes with a gap-free
 * log in which every node completed exactly once.
 */

const DELAY_WORKFLOW = '00000000-0000-4000-8000-00000000f004';
const KEY = 'wr_demo_key';

function boot(env: Record<string, string>): { child: ChildProcess; url: Promise<string> } {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    env: { ...process.env, PORT: '0', LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const url = new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no listening line:\n${out}`)), 60_000);
    child.stdout!.on('data', (b: Buffer) => {
      out += b.toString();
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    child.stderr!.on('data', (b: Buffer) => (out += b.toString()));
    child.on('exit', (code) => reject(new Error(`exited ${code}:\n${out}`)));
  });
  return { child, url };
}

async function api(url: string, path: string, init: RequestInit = {}): Promise<any> {
  const res = await fetch(`${url}/v1${path}`, { ...init, headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', ...init.headers } });
  return res.json();
}

test('a run suspended on a delay survives kill -9 of the server and completes after a restart', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'wr-kill-'));
  // With a database server, isolate this test in its own schema-less database would need DDL rights;
  // the embedded database in a fresh directory is what the default start uses anyway.
  const env = { DATA_DIR: dir, DATABASE_URL: '' };
  let first = boot(env);
  let second: ReturnType<typeof boot> | undefined;
  try {
    const url1 = await first.url;
    const accepted = await api(url1, '/runs', { method: 'POST', body: JSON.stringify({ workflow: DELAY_WORKFLOW, inputs: {} }) });
    const id = accepted.run.id as string;
    const suspended = await waitFor(
      'the run to be suspended',
      async () => {
        const r = await api(url1, `/runs/${id}`);
        return r.status === 'suspended' && r;
      },
      10_000,
      200,
    );
    assert.is(suspended.status, 'suspended');
    first.child.kill('SIGKILL');
    await new Promise((r) => first.child.once('exit', r));

    second = boot(env);
    const url2 = await second.url;
    const done = await waitFor(
      'the run to end',
      async () => {
        const r = await api(url2, `/runs/${id}`);
        return ['completed', 'failed', 'cancelled'].includes(r.status) && r;
      },
      30_000,
      200,
    );
    assert.is(done.status, 'completed', JSON.stringify(done));
    assert.is(done.outcome, 'completed');
    assert.equal(done.outputs.map((o: any) => o.nodeId).sort(), ['greeting', 'items']);
    const events = (await api(url2, `/runs/${id}/events`)).events as any[];
    assert.equal(
      events.map((e) => e.sequence),
      events.map((_, i) => i + 1),
    );
    const completedNodes = events.filter((e) => e.type === 'node.completed').map((e) => e.nodeId);
    assert.is(new Set(completedNodes).size, completedNodes.length, `a node completed twice: ${completedNodes}`);
    assert.is(events.filter((e) => e.type === 'run.completed').length, 1);
    assert.ok(events.some((e) => e.type === 'run.resumed'));
  } finally {
    first.child.kill('SIGKILL');
    second?.child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
});

test.run();
