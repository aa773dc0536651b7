import { mkdirSync, writeFileSync } from 'node:fs';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { App } from '../../src/app.ts';
import { EmbeddedEngine } from '../../src/engine/embedded/embedded-engine.ts';
import { startPeerApp, startTestApp, type TestApp } from '../helpers/app.ts';

/**
 * Live events cross API processes on a Postgres server: a stream opened on process A follows a run
 * that process B's embedded engine executes (A runs no engine), and sees every event in order, with
 * no gap and no duplicate, until the run completes. Two apps with their own buses on one database
 * stand for the two processes (each LISTENs on its own connection).
 */

const WORKFLOW = 'cccccccc-0000-4000-8000-000000000001';
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
  ],
};

interface Ctx {
  a: TestApp;
  b: App;
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
    ({ app: ctx.b } = await startPeerApp((deps) => new EmbeddedEngine(deps)));
  });
  t.after(async (ctx) => {
    await ctx.b?.close();
    await ctx.a?.close();
  });

  t('a stream on one process sees every event of a run executed by another, in order, then the end', async ({ a }) => {
    const started = await a.call('POST', '/runs', { key: 'wr_scale_bob', body: { workflow: WORKFLOW, inputs: {} } });
    assert.is(started.status, 202);
    const id = started.body.run.id as string;
    // A raw reader, so every frame counts whatever its event type.
    const frames: { type: string; id: string; data: any }[] = [];
    const res = await fetch(`${a.base}/runs/${id}/stream`, { headers: { authorization: 'Bearer wr_scale_bob' }, signal: AbortSignal.timeout(20_000) });
    assert.is(res.status, 200);
    const done = (async () => {
      const decoder = new TextDecoder();
      let buffer = '';
      for await (const chunk of res.body!) {
        buffer += decoder.decode(chunk as Uint8Array, { stream: true });
        let cut: number;
        while ((cut = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          const field = (name: string) => block.split('\n').find((l) => l.startsWith(`${name}:`))?.slice(name.length + 1).trim();
          const data = field('data');
          if (data === undefined) continue; // a heartbeat comment
          frames.push({ type: field('event') ?? 'message', id: field('id') ?? '', data: JSON.parse(data) });
        }
      }
    })();
    await done;
    assert.is(frames[0]!.type, 'snapshot');
    const seqs = frames.slice(1).map((f) => Number(f.id));
    assert.equal(seqs, Array.from({ length: seqs.length }, (_, i) => i + 1), 'gap-free, no duplicates');
    assert.is(frames.at(-1)!.type, 'run.completed');
    const types = frames.slice(1).map((f) => f.type);
    assert.ok(types.includes('run.suspended') && types.includes('run.resumed'), `the delay was seen live: ${types.join(', ')}`);
    // Everything the stream saw is the log, as the other process wrote it.
    const log = await a.call('GET', `/runs/${id}/events`, { key: 'wr_scale_bob' });
    assert.equal(log.body.events.map((e: { sequence: number; type: string }) => `${e.sequence}:${e.type}`), frames.slice(1).map((f) => `${f.id}:${f.type}`));
  });
}

t.run();
