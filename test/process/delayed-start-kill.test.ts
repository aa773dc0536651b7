import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { resetDb, testOrm } from '../helpers/db.ts';
import { startService, type ServiceProcess } from '../helpers/service-process.ts';
import { waitFor } from '../helpers/wait-for.ts';

/**
 * Delayed starts across `kill -9` (docs/design/flow-control.md#entering-the-line): `npm start` accepts two
 * scheduled runs and is killed at once; one start comes while no process runs, the other after the
 * restart. The restarted process starts each once, neither before its time.
 */

const GREETING = '00000000-0000-4000-8000-00000000f001';
const KEY = 'wr_demo_key';

async function api(base: string, path: string, init: RequestInit = {}): Promise<any> {
  const res = await fetch(`${base}/v1${path}`, { ...init, headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', ...init.headers } });
  return res.json();
}

test('kill -9 with two scheduled runs: the restarted service starts each once, at or after its time', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'wr-delayed-kill-'));
  // On a Postgres server the service shares the test database (emptied first); else PGlite in `dir`.
  if (process.env.DATABASE_URL) await resetDb(await testOrm());
  const env = { DATA_DIR: dir, LOG_LEVEL: 'warn' };
  const started: ServiceProcess[] = [];
  try {
    const first = startService(env);
    started.push(first);
    const url = await first.url;
    const start = async (startAfter: string) => {
      const body = JSON.stringify({ workflow: GREETING, inputs: { name: 'Ada' } });
      const answer = await api(url, '/runs', { method: 'POST', headers: { 'start-after': startAfter }, body });
      assert.ok(answer.run, JSON.stringify(answer));
      return answer.run.id as string;
    };
    const whileDown = await start('2s');
    const afterRestart = await start('8s');
    first.child.kill('SIGKILL');
    await new Promise((r) => first.child.once('exit', r));
    await new Promise((r) => setTimeout(r, 2_500));

    const second = startService(env);
    started.push(second);
    const base = await second.url;
    for (const id of [whileDown, afterRestart]) {
      const done = await waitFor(
        `run ${id} to end`,
        async () => {
          const run = await api(base, `/runs/${id}`);
          return ['completed', 'failed', 'cancelled'].includes(run.status) && run;
        },
        30_000,
        100,
      );
      assert.is(done.status, 'completed', JSON.stringify(done));
      assert.ok(Date.parse(done.startedAt) >= Date.parse(done.scheduledFor), `started ${done.startedAt}, scheduled ${done.scheduledFor}`);
      const events = (await api(base, `/runs/${id}/events`)).events as { type: string }[];
      assert.is(events.filter((e) => e.type === 'run.started').length, 1, `${id} started once`);
      assert.is(events.filter((e) => e.type === 'run.completed').length, 1);
    }
  } finally {
    for (const s of started) if (s.child.exitCode === null && s.child.signalCode === null) await s.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test.run();
