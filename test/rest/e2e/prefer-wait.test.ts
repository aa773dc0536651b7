import { test } from 'uvu';
import { connect } from 'node:net';
import * as assert from 'uvu/assert';
import type { RunEventBus } from '../../../src/services/events/bus.ts';
import { W_DELAY, W_LONG_DELAY, W_SUMMARY } from './helpers/catalog.ts';
import { engineCases, getRun, scenario, settle, sleep, withE2e, type E2e } from './helpers/harness.ts';

/**
 * `Prefer: wait=N` on POST /runs (docs/design/prefer-wait.md), on every engine: a run that ends in time
 * is answered 200 with the run as GET /runs/{id} shows it, a longer one the usual 202 after N seconds,
 * idempotent replays wait too, and a client that hangs up mid-wait loses nothing.
 */

/** Counts the bus subscriptions open right now, per run (the waits' listeners). */
function countSubscriptions(bus: RunEventBus): Map<string, number> {
  const open = new Map<string, number>();
  const subscribe = bus.subscribe.bind(bus);
  bus.subscribe = (runId, listener) => {
    open.set(runId, (open.get(runId) ?? 0) + 1);
    const unsubscribe = subscribe(runId, listener);
    let once = false;
    return () => {
      if (!once) open.set(runId, open.get(runId)! - 1);
      once = true;
      unsubscribe();
    };
  };
  return open;
}

const post = (e: E2e, workflow: string, headers: Record<string, string>, inputs: Record<string, unknown> = {}) =>
  e.t.call('POST', '/runs', { body: { workflow, inputs }, headers });

for (const engine of engineCases('rest e2e: Prefer wait')) {
  // A slower engine gets more time to finish; the point is the 200, not the exact figure.
  const wait = engine.name === 'temporal' ? 30 : 10;

  scenario(engine, 'a short run with Prefer: wait is answered 200 with the completed run, as GET /runs/{id} shows it', async () => {
    await withE2e(engine, {}, async (e) => {
      const res = await post(e, W_SUMMARY, { prefer: `wait=${wait}` }, { topic: 'owls' });
      assert.is(res.status, 200, res.text);
      assert.is(res.headers.get('preference-applied'), `wait=${wait}`);
      assert.is(res.headers.get('location'), `${e.t.publicBase}/runs/${res.body.id}`);
      assert.ok(res.headers.get('ratelimit-remaining'), 'the rate limit headers as on a 202');
      assert.is(res.body.status, 'completed');
      assert.equal(res.body.outputs, [{ nodeId: 'out', name: 'Summary', type: 'text', value: 'About owls' }]);
      assert.equal(res.body, await getRun(e, res.body.id));
    });
  });

  scenario(engine, 'a run longer than the wait is answered 202 with the accepted run after about N seconds', async () => {
    await withE2e(engine, {}, async (e) => {
      const started = Date.now();
      const res = await post(e, W_LONG_DELAY, { prefer: 'wait=1' });
      const took = Date.now() - started;
      assert.is(res.status, 202, res.text);
      assert.is(res.body.run.status, 'accepted');
      assert.is(res.headers.get('preference-applied'), 'wait=1');
      assert.ok(took >= 950 && took < 2900, `answered after ${took} ms`);
      assert.is((await getRun(e, res.body.run.id)).status !== 'completed', true, 'the 3-second run had not ended');
      assert.is((await settle(e, res.body.run.id)).status, 'completed');
    });
  });

  if (engine.name === 'temporal') continue; // the rest is engine-independent HTTP behaviour

  scenario(engine, 'an idempotent replay with Prefer: wait waits for the original run and answers 200 with it', async () => {
    await withE2e(engine, {}, async (e) => {
      const first = await post(e, W_DELAY, { 'idempotency-key': 'wait-replay' });
      assert.is(first.status, 202);
      const replay = await post(e, W_DELAY, { 'idempotency-key': 'wait-replay', prefer: 'respond-async, wait=10' });
      assert.is(replay.status, 200, replay.text);
      assert.is(replay.headers.get('idempotent-replayed'), 'true');
      assert.is(replay.headers.get('preference-applied'), 'wait=10');
      assert.is(replay.body.id, first.body.run.id);
      assert.is(replay.body.status, 'completed');
    });
  });

  scenario(engine, 'a wait above 60 s is capped to 60, and a malformed or zero wait is ignored (plain 202 at once)', async () => {
    await withE2e(engine, {}, async (e) => {
      const capped = await post(e, W_SUMMARY, { prefer: 'wait=3600' }, { topic: 'bees' });
      assert.is(capped.status, 200, capped.text);
      assert.is(capped.headers.get('preference-applied'), 'wait=60');
      for (const prefer of ['wait=soon', 'wait=-1', 'wait=1.5', 'wait=0', 'wait', 'handling=lenient']) {
        const started = Date.now();
        const res = await post(e, W_LONG_DELAY, { prefer });
        assert.is(res.status, 202, `${prefer}: ${res.text}`);
        assert.is(res.headers.get('preference-applied'), null, prefer);
        assert.ok(Date.now() - started < 900, `${prefer} did not wait`);
      }
    });
  });

  scenario(engine, 'a client that hangs up mid-wait loses nothing: its listener is released and the run completes', async () => {
    await withE2e(engine, {}, async (e) => {
      const open = countSubscriptions(e.t.deps.bus);
      const rejections: unknown[] = [];
      const onRejection = (err: unknown) => rejections.push(err);
      process.on('unhandledRejection', onRejection);
      try {
        const { hostname, port } = new URL(e.t.url);
        const body = JSON.stringify({ workflow: W_DELAY, inputs: {} });
        const socket = connect(Number(port), hostname);
        const received: Buffer[] = [];
        socket.on('data', (c: Buffer) => received.push(c));
        socket.on('error', () => undefined);
        await new Promise<void>((r) => socket.once('connect', r));
        socket.write(
          `POST /v1/runs HTTP/1.1\r\nHost: ${hostname}\r\nAuthorization: Bearer wr_test_bob\r\nContent-Type: application/json\r\n` +
            `Idempotency-Key: hang-up\r\nPrefer: wait=30\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
        );
        // Until the wait has subscribed: the request was accepted and is waiting.
        const until = Date.now() + 5000;
        while (![...open.values()].some((n) => n > 0)) {
          assert.ok(Date.now() < until, 'the wait never subscribed');
          await sleep(10);
        }
        socket.destroy();
        await sleep(200);
        assert.equal(
          [...open.values()].filter((n) => n !== 0),
          [],
          'no listener left after the hang-up',
        );
        assert.is(received.length, 0, 'nothing was answered before the hang-up');
        // The run goes on; a replay of the same request finds it and waits for its end.
        const replay = await post(e, W_DELAY, { 'idempotency-key': 'hang-up', prefer: 'wait=10' });
        assert.is(replay.status, 200, replay.text);
        assert.is(replay.body.status, 'completed');
        assert.equal(rejections, []);
      } finally {
        process.off('unhandledRejection', onRejection);
      }
    });
  });
}

test.run();
