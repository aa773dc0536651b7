import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { Client, Connection } from '@temporalio/client';
import { openOrm, type Orm } from '../../src/db/orm.ts';
import { countActions } from '../helpers/temporal-actions.ts';
import { countTemporal, temporalAddress } from '../helpers/temporal.ts';
import { resetDb, testOrm } from '../helpers/db.ts';
import { startService, type ServiceProcess } from '../helpers/service-process.ts';
import { waitFor } from '../helpers/wait-for.ts';

/**
 * `npm start` as real processes (docs/operations.md#start-and-stop): ready only when ready (a run POSTed
 * the moment /readyz turns 200 runs, admitted at once, even with RUN_CAPACITY=1 and a 3 s queue limit),
 * and stop means drain (SIGTERM during a burst of POSTs: exit 0, an open stream ends with a `retry:`
 * hint, and a restart finishes every accepted run, charged once).
 */

const KEY = 'wr_demo_key';
const GREETING = '00000000-0000-4000-8000-00000000f001';
const PARSE_LATER = '00000000-0000-4000-8000-00000000f004';
const auth = { authorization: `Bearer ${KEY}` };

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const addr = s.address();
      s.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

/** A fresh database for the service: the test server's, emptied, or a PGlite directory of its own. */
async function freshDb(): Promise<{ env: Record<string, string>; open: () => Promise<Orm>; done: () => void }> {
  if (process.env.DATABASE_URL) {
    await resetDb(await testOrm());
    return { env: {}, open: () => testOrm(), done: () => undefined };
  }
  const dir = mkdtempSync(join(tmpdir(), 'wr-lifecycle-'));
  let orm: Orm | undefined;
  return {
    env: { DATA_DIR: dir },
    open: async () => (orm = await openOrm({ dataDir: dir })),
    done: () => {
      void orm?.close(true);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Starts the service on a known port and polls /readyz from the first moment; resolves when it answers 200. */
async function startReady(env: Record<string, string>): Promise<{ svc: ServiceProcess; url: string; exited: Promise<number | null> }> {
  const port = await freePort();
  const svc = startService({ PORT: String(port), ...env });
  svc.url.catch(() => undefined);
  const exited = new Promise<number | null>((r) => svc.child.on('exit', (code) => r(code)));
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitFor('/readyz 200', async () => (await fetch(`${url}/readyz`).catch(() => null))?.status === 200, 120_000, 10);
  } catch (err) {
    svc.child.kill('SIGKILL');
    throw new Error(`${(err as Error).message}\n${svc.output()}`);
  }
  return { svc, url, exited };
}

async function postRun(url: string, workflow: string, inputs: Record<string, unknown> = {}): Promise<Response> {
  return fetch(`${url}/v1/runs`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ workflow, inputs }) });
}

async function runStatus(url: string, id: string): Promise<any> {
  const res = await fetch(`${url}/v1/runs/${id}`, { headers: auth });
  return res.status === 200 ? res.json() : null;
}

const terminal = (r: any) => r && ['completed', 'failed', 'cancelled'].includes(r.status);

async function readyThenRun(engineEnv: Record<string, string>): Promise<{ runId: string }> {
  const db = await freshDb();
  const { svc, url, exited } = await startReady({ ...db.env, ...engineEnv, RUN_CAPACITY: '1', QUEUE_MAX_WAIT_SECONDS: '3' });
  try {
    const res = await postRun(url, GREETING, { name: 'Ada' });
    assert.is(res.status, 202, await res.clone().text());
    const runId = ((await res.json()) as any).run.id as string;
    const run = await waitFor(
      'the run to end',
      async () => {
        const r = await runStatus(url, runId);
        return terminal(r) ? r : null;
      },
      30_000,
      50,
    );
    assert.is(run.status, 'completed', JSON.stringify(run));
    svc.child.kill('SIGTERM');
    assert.is(await exited, 0, svc.output());
    return { runId };
  } finally {
    svc.child.kill('SIGKILL');
    db.done();
  }
}

test('embedded: a run POSTed the moment /readyz turns 200 runs to completion (RUN_CAPACITY=1, QUEUE_MAX_WAIT_SECONDS=3)', async () => {
  await readyThenRun({});
});

const temporal = temporalAddress('lifecycle');
if (temporal) {
  test(
    'temporal: a run POSTed the moment /readyz turns 200 runs, admitted at its start (no admission timer, no signal)',
    countTemporal(async () => {
      const taskQueue = `lifecycle-${process.pid}-${Date.now()}`;
      const { runId } = await readyThenRun({ ENGINE: 'temporal', TEMPORAL_ADDRESS: temporal, TEMPORAL_TASK_QUEUE: taskQueue });
      const connection = await Connection.connect({ address: temporal });
      try {
        const history = await new Client({ connection }).workflow.getHandle(runId).fetchHistory();
        const billed = countActions(history).billed;
        assert.not.ok(billed.includes('EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED'), `signalled: ${billed.join(', ')}`);
        assert.not.ok(billed.includes('EVENT_TYPE_TIMER_STARTED'), `a timer: ${billed.join(', ')}`);
      } finally {
        await connection.close();
      }
    }),
  );
}

/** The raw text of an SSE response until it ends (the helper in sse-frames.ts keeps only data frames). */
async function rawStream(url: string): Promise<{ text: () => string; ended: Promise<'ended' | 'error'> }> {
  const res = await fetch(url, { headers: auth });
  assert.is(res.status, 200);
  let text = '';
  const decoder = new TextDecoder();
  const ended = (async () => {
    try {
      for await (const chunk of res.body!) text += decoder.decode(chunk as Uint8Array, { stream: true });
      return 'ended' as const;
    } catch {
      return 'error' as const;
    }
  })();
  return { text: () => text, ended };
}

test('SIGTERM during a burst of POSTs: exit 0, an open stream ends with retry:, a restart finishes every accepted run, each charged once', async () => {
  const db = await freshDb();
  let first: Awaited<ReturnType<typeof startReady>> | undefined;
  let second: Awaited<ReturnType<typeof startReady>> | undefined;
  try {
    first = await startReady({ ...db.env, LOG_LEVEL: 'info' });
    const url1 = first.url;
    // A run that takes five seconds, followed over SSE across the SIGTERM.
    const slow = ((await (await postRun(url1, PARSE_LATER)).json()) as any).run.id as string;
    const stream = await rawStream(`${url1}/v1/runs/${slow}/stream`);
    const accepted: string[] = [slow];
    const refusedBy: string[] = [];
    const posts: Promise<void>[] = [];
    // POSTs every 15 ms; the SIGTERM once ten were answered, then twenty more into the drain.
    let killedAt = -1;
    for (let i = 0; killedAt < 0 ? i < 400 : i < killedAt + 20; i++) {
      if (killedAt < 0 && accepted.length >= 10) {
        first.svc.child.kill('SIGTERM');
        killedAt = i;
      }
      posts.push(
        postRun(url1, i % 3 ? GREETING : PARSE_LATER, { name: `n${i}` }).then(
          async (res) => {
            if (res.status === 202) accepted.push(((await res.json()) as any).run.id);
            else refusedBy.push(`${res.status} ${await res.text()}`);
          },
          () => undefined, // not accepted: the connection was refused or closed before an answer
        ),
      );
      await new Promise((r) => setTimeout(r, 15));
    }
    await Promise.all(posts);
    assert.is(await first.exited, 0, first.svc.output());
    assert.equal(
      refusedBy.filter((r) => r.startsWith('5') && !r.startsWith('503')),
      [],
      'no 500 during the drain',
    );
    assert.ok(killedAt > 0, 'the SIGTERM went out during the burst');
    assert.is(await stream.ended, 'ended', 'the stream ended cleanly');
    assert.match(stream.text(), /\nretry: \d+\n\n$/, 'the last frame is the retry hint');
    const log = first.svc.output();
    for (const phase of ['drain: /readyz answers 503', 'drain: HTTP requests finished', 'drain: engine stopped', 'drain: done']) assert.match(log, phase);

    second = await startReady({ ...db.env, LOG_LEVEL: 'warn' });
    const url2 = second.url;
    for (const id of accepted) {
      const r = await waitFor(
        `run ${id} to end after the restart`,
        async () => {
          const run = await runStatus(url2, id);
          return terminal(run) ? run : null;
        },
        60_000,
        100,
      );
      assert.is(r.status, 'completed', JSON.stringify(r));
    }
    second.svc.child.kill('SIGTERM');
    assert.is(await second.exited, 0, second.svc.output());
    second = undefined;

    const em = (await db.open()).em.fork();
    const twice = await em.execute(`select run_id, kind, count(*)::int as n from ledger_entries where run_id is not null group by 1, 2 having count(*) > 1`);
    assert.equal(twice, [], 'no run charged twice');
    const [held] = await em.execute<{ held: string }[]>(`select sum(held_usd)::text as held from wallets`);
    assert.is(Number(held!.held), 0, 'no hold left behind');
  } finally {
    first?.svc.child.kill('SIGKILL');
    second?.svc.child.kill('SIGKILL');
    db.done();
  }
});

test.run();
