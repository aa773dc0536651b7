import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { App } from '../../src/app.ts';
import { EmbeddedEngine } from '../../src/engine/embedded/embedded-engine.ts';
import { startPeerApp, startTestApp, type TestApp } from '../helpers/app.ts';
import { readSse, resumeCursors, resumedTailProblem, resumeSse, wholeLogProblem } from '../helpers/sse-frames.ts';

/**
 * Live events cross API processes on a Postgres server: a stream opened on process A follows a run
 * that process B's embedded engine executes (A runs no engine), and sees every event in order, with
 * no gap and no duplicate, until the run completes; a `Prefer: wait` on A hears B's run end. Two apps with their own buses on one database
 * stand for the two processes (each LISTENs on its own connection).
 */

const WORKFLOW = 'cccccccc-0000-4000-8000-000000000001';
const FETCHER = 'cccccccc-0000-4000-8000-000000000002';
const catalog = {
  pricing: { stepUsd: '0.000100' },
  accounts: [{ handle: 'bob', walletUsd: '10.000000', apiKeys: [{ secret: 'wr_scale_bob', scopes: ['run:execute', 'run:read'] }] }],
  workflows: [
    {
      id: WORKFLOW,
      owner: 'bob',
      name: 'Wait then greet',
      runModel: 'free',
      versions: [
        {
          label: 'v1',
          graph: {
            nodes: [
              { id: 'wait', kind: 'delay', seconds: 1 },
              { id: 't1', kind: 'text.template', template: 'hello', after: ['wait'] },
              { id: 't2', kind: 'text.template', template: '{{t1}} world' },
              { id: 'out', kind: 'output', from: 't2', name: 'Greeting' },
            ],
          },
        },
      ],
    },
    {
      id: FETCHER,
      owner: 'bob',
      name: 'Fetch',
      runModel: 'free',
      versions: [
        {
          label: 'v1',
          graph: {
            nodes: [
              { id: 'url', kind: 'input.url', required: true },
              { id: 'fetch', kind: 'http.request', url: '{{url}}' },
              { id: 'out', kind: 'output', from: 'fetch', name: 'Body' },
            ],
          },
        },
      ],
    },
  ],
};

interface Ctx {
  a: TestApp;
  b: App;
  bEngine: EmbeddedEngine;
}
const t = suite<Ctx>('live events across API processes');

if (!process.env.DATABASE_URL) {
  console.log('  live events across processes: skipped — needs a Postgres server (DATABASE_URL); embedded PGlite is one process');
} else {
  t.before(async (ctx) => {
    mkdirSync('.tmp', { recursive: true });
    const file = `.tmp/scale-out-catalog-${process.pid}.json`;
    writeFileSync(file, JSON.stringify(catalog));
    ctx.a = await startTestApp({ catalog: file }); // API only: a NullEngine drives nothing
    ({ app: ctx.b } = await startPeerApp((deps) => (ctx.bEngine = new EmbeddedEngine(deps)), { ALLOW_PRIVATE_NETWORK: '1' }));
  });
  t.after(async (ctx) => {
    await ctx.b?.close();
    await ctx.a?.close();
  });

  t('a stream on one process sees every event of a run executed by another, in order, then the end', async ({ a }) => {
    const started = await a.call('POST', '/runs', { key: 'wr_scale_bob', body: { workflow: WORKFLOW, inputs: {} } });
    assert.is(started.status, 202);
    const id = started.body.run.id as string;
    const sse = readSse(`${a.base}/runs/${id}/stream`, { authorization: 'Bearer wr_scale_bob' });
    assert.is(await sse.status, 200);
    await sse.ended;
    const frames = sse.frames;
    assert.is(wholeLogProblem(frames), null);
    assert.is(frames.at(-1)!.type, 'run.completed');
    const types = frames.slice(1).map((f) => f.type);
    assert.ok(types.includes('run.suspended') && types.includes('run.resumed'), `the delay was seen live: ${types.join(', ')}`);
    // Everything the stream saw is the log, as the other process wrote it.
    const log = await a.call('GET', `/runs/${id}/events`, { key: 'wr_scale_bob' });
    assert.equal(
      log.body.events.map((e: { sequence: number; type: string }) => `${e.sequence}:${e.type}`),
      frames.slice(1).map((f) => `${f.id}:${f.type}`),
    );
  });

  t('a stream on one process resumed below, at or past the last event of a run another process executes ends after the run ends', async ({ a }) => {
    const run = async () => {
      const started = await a.call('POST', '/runs', { key: 'wr_scale_bob', body: { workflow: WORKFLOW, inputs: {} } });
      assert.is(started.status, 202, started.text);
      return started.body.run.id as string;
    };
    const eventsOf = async (id: string) =>
      (await a.call('GET', `/runs/${id}/events`, { key: 'wr_scale_bob' })).body.events as { sequence: number; type: string }[];
    const first = await run();
    await readSse(`${a.base}/runs/${first}/stream`, { authorization: 'Bearer wr_scale_bob' }).ended;
    const cursors = resumeCursors((await eventsOf(first)).at(-1)!.sequence);
    await Promise.all(
      cursors.map(async (cursor, i) => {
        const id = await run();
        const sse = resumeSse(a.base, id, cursor, 'wr_scale_bob', i % 2 === 0);
        const ended = await Promise.race([sse.ended.then(() => true), new Promise<boolean>((r) => setTimeout(r, 15_000, false))]);
        sse.close();
        assert.ok(ended, `cursor ${cursor}: the stream was still open 15 s after it opened`);
        assert.ok(['pending', 'running'].includes(sse.frames[0]!.data.status), `cursor ${cursor}: opened while the run was live`);
        assert.is(resumedTailProblem(sse.frames, await eventsOf(id), cursor), null);
      }),
    );
  });

  t('POST /runs with Prefer: wait on one process answers 200 when a run executed by another ends', async ({ a }) => {
    const res = await a.call('POST', '/runs', { key: 'wr_scale_bob', body: { workflow: WORKFLOW, inputs: {} }, headers: { prefer: 'wait=15' } });
    assert.is(res.status, 200, res.text);
    assert.is(res.headers.get('preference-applied'), 'wait=15');
    assert.is(res.body.status, 'completed');
    assert.equal(
      res.body.outputs.map((o: { value: unknown }) => o.value),
      ['hello world'],
    );
  });

  t('a cancel through one process stops the run another process executes at once: its HTTP step is aborted mid-request', async ({ a, bEngine }) => {
    // An endpoint that never answers; it records when the service hangs up.
    let hungUp: ((at: number) => void) | null = null;
    const closed = new Promise<number>((resolve) => (hungUp = resolve));
    let reached: (() => void) | null = null;
    const requested = new Promise<void>((resolve) => (reached = resolve));
    const slow: Server = createServer((req) => {
      reached!();
      req.socket.on('close', () => hungUp!(Date.now()));
    });
    await new Promise<void>((resolve) => slow.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(slow.address() as { port: number }).port}/never`;
      const started = await a.call('POST', '/runs', { key: 'wr_scale_bob', body: { workflow: FETCHER, inputs: { url } } });
      assert.is(started.status, 202, started.text);
      const id = started.body.run.id as string;
      await requested; // the other process is in the middle of the request
      assert.equal(bEngine.activeRuns(), [id]);
      const at = Date.now();
      const cancel = await a.call('POST', `/runs/${id}/cancel`, { key: 'wr_scale_bob' });
      assert.is(cancel.body.status, 'cancelled');
      // The lease renewal (every 5 s) would notice too, at a random moment of its period; the NOTIFY
      // takes tens of milliseconds.
      const hungUpAt = await Promise.race([closed, new Promise<number>((r) => setTimeout(() => r(Infinity), 3_000))]);
      assert.ok(hungUpAt - at < 750, `the HTTP request was aborted ${hungUpAt - at} ms after the cancel`);
      for (let i = 0; i < 100 && bEngine.activeRuns().length; i++) await new Promise((r) => setTimeout(r, 20));
      assert.equal(bEngine.activeRuns(), [], 'the driver stopped');
      const run = await a.call('GET', `/runs/${id}`, { key: 'wr_scale_bob' });
      assert.equal([run.body.status, run.body.billingStatus], ['cancelled', 'not_charged']);
    } finally {
      slow.closeAllConnections();
      slow.close();
    }
  });
}

t.run();
