import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { startProviderStub } from '../../helpers/provider-stub.ts';
import { W_STORY } from './helpers/catalog.ts';
import {
  assertLogSound,
  engineCases,
  openaiEnv,
  runEvents,
  scenario,
  settle,
  signedHook,
  startRun,
  withE2e,
  type E2e,
  type EngineCase,
} from './helpers/harness.ts';
import { followStream, spawnWorker } from './helpers/sse.ts';

/**
 * Live SSE over HTTP, on every engine: a real SSE client that opens GET /runs/{id}/stream right after
 * POST /runs sees every event of the run (a timer suspension, the LLM's deltas, the terminal event) in
 * order, with no gap and no duplicate, exactly the log GET /runs/{id}/events returns. On a Postgres
 * server the Temporal case also runs with the worker in ANOTHER process (`npm run worker`): the API
 * process runs no worker (TEMPORAL_WORKER=off) and hears the events over LISTEN/NOTIFY.
 */

const CHUNKS = Array.from({ length: 12 }, (_, i) => `part${i} `);

/** Starts a W_STORY run, follows its stream to the end and compares it with the event log. */
async function streamWholeRun(e: E2e, engine: EngineCase): Promise<void> {
  const id = await startRun(e, W_STORY);
  const stream = await followStream(e, id, engine.timeoutMs);
  assert.is(stream.opens, 1, 'one connection, no reconnect');
  assert.ok(['pending', 'running'].includes(stream.snapshot.status), `opened while the run was in flight (${stream.snapshot.status})`);
  const log = await runEvents(e, id);
  assertLogSound(log);
  assert.equal(
    stream.frames.map((f) => f.event),
    log,
    'the stream is the log: every event, in order, once',
  );
  assert.equal(
    stream.frames.map((f) => f.id),
    log.map((ev) => String(ev.sequence)),
    'SSE ids are the sequences',
  );
  const types = stream.frames.map((f) => f.type);
  assert.equal(types.slice(0, 3), ['run.queued', 'run.preparing', 'run.started']);
  assert.ok(types.indexOf('run.suspended') < types.indexOf('run.resumed'), 'the timer suspension, live');
  assert.equal(stream.frames.find((f) => f.type === 'run.suspended')!.event.data, { status: 'suspended', reason: 'wait_timer' });
  const text = stream.frames
    .filter((f) => f.type === 'node.output.delta' && f.event.nodeId === 'llm')
    .map((f) => f.event.data.text)
    .join('');
  assert.is(text, CHUNKS.join(''));
  assert.is(types.at(-1), 'run.completed');
  const run = await settle(e, id);
  assert.is(run.status, 'completed');
  assert.equal(
    run.outputs.map((o: any) => o.value),
    [CHUNKS.join('')],
  );
  assert.equal((await signedHook(e, id, 'run.completed')).data, run);
}

for (const engine of engineCases('rest e2e: live SSE')) {
  scenario(engine, 'a live SSE client sees every event of a run in order, without gaps or duplicates', async () => {
    const stub = await startProviderStub({ chunks: CHUNKS, delayMsBetweenChunks: 30 });
    try {
      await withE2e(engine, { env: openaiEnv(stub) }, (e) => streamWholeRun(e, engine));
    } finally {
      await stub.close();
    }
  });

  if (engine.name !== 'temporal') continue;
  if (!process.env.DATABASE_URL) {
    console.log('  rest e2e: live SSE with the Temporal worker in another process needs a Postgres server (DATABASE_URL); not run on PGlite');
    continue;
  }
  scenario(engine, 'with the worker in another process (npm run worker), the API streams its events live, in order, without gaps', async () => {
    const stub = await startProviderStub({ chunks: CHUNKS, delayMsBetweenChunks: 30 });
    try {
      await withE2e(engine, { env: { ...openaiEnv(stub), TEMPORAL_WORKER: 'off' } }, async (e) => {
        const worker = await spawnWorker(
          {
            ENGINE: 'temporal',
            DATABASE_URL: e.env.DATABASE_URL!,
            ENCRYPTION_KEY: e.env.ENCRYPTION_KEY!,
            TEMPORAL_ADDRESS: e.env.TEMPORAL_ADDRESS!,
            TEMPORAL_TASK_QUEUE: e.env.TEMPORAL_TASK_QUEUE!,
            ALLOW_PRIVATE_NETWORK: '1',
            DATA_DIR: '.tmp/test-worker-data',
            ...openaiEnv(stub),
          },
          120_000,
        );
        try {
          await streamWholeRun(e, engine);
          assert.is(stub.requests.length, 1, 'the worker process called the provider once');
        } finally {
          await worker.stop();
        }
      });
    } finally {
      await stub.close();
    }
  });
}

test.run();
