import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { W_DELAY, W_LONG_DELAY } from './helpers/catalog.ts';
import { engineCases, getRun, runEvents, scenario, settle, shape, signedHook, startRun, waitRun, wallet, withE2e, type E2e } from './helpers/harness.ts';

/**
 * The queue over HTTP, on every engine: FIFO within RUN_CAPACITY (a suspended run holds its slot), an
 * account's own concurrency limit, and the queue timeout (QUEUE_MAX_WAIT_SECONDS: failed, not charged).
 */

const inFlight = (r: any) => ['running', 'suspended'].includes(r.status);
const ms = (iso: string) => Date.parse(iso);

/** Waits until the run has left the queue (running or suspended, or already past them). */
const waitStarted = (e: E2e, id: string, key = 'wr_test_bob') => waitRun(e, id, (r) => r.startedAt !== null, 'started', key);

for (const engine of engineCases('rest e2e: queue')) {
  scenario(engine, 'RUN_CAPACITY=1: runs wait in line with their positions and start one after another, first in first out', async () => {
    await withE2e(engine, { env: { RUN_CAPACITY: '1' } }, async (e) => {
      const a = await startRun(e, W_LONG_DELAY);
      await waitRun(e, a, inFlight, 'in flight');
      const b = await startRun(e, W_DELAY);
      const c = await startRun(e, W_DELAY);
      const qb = await getRun(e, b);
      const qc = await getRun(e, c);
      assert.equal([qb.status, qb.startedAt, qb.billingStatus, qb.queue?.state, qb.queue?.position], ['pending', null, 'pending', 'waiting', 1]);
      assert.equal([qc.status, qc.queue?.state, qc.queue?.position], ['pending', 'waiting', 2]);
      const runs = [await settle(e, a), await settle(e, b), await settle(e, c)];
      for (const r of runs) {
        assert.is(r.status, 'completed');
        assert.is(r.displayedChargeUsd, 0.2502, 'waiting costs nothing');
        assert.is(r.queue, null);
      }
      for (let i = 1; i < runs.length; i++) {
        assert.ok(ms(runs[i].startedAt) >= ms(runs[i - 1].completedAt), `run ${i + 1} started after run ${i} completed: one at a time, in order`);
      }
      assert.equal(await wallet(e, 'bob'), { balance: '4.249400', held: '0.000000' });
    });
  });

  scenario(engine, 'nine runs of two accounts under RUN_CAPACITY=3: never more than three in flight, each settled and reported once', async () => {
    await withE2e(engine, { env: { RUN_CAPACITY: '3' } }, async (e) => {
      const keys = Array.from({ length: 9 }, (_, i) => (i % 2 ? 'wr_test_alice' : 'wr_test_bob'));
      const ids = await Promise.all(keys.map((key) => startRun(e, W_DELAY, {}, key)));
      const runs = [];
      for (const [i, id] of ids.entries()) runs.push(await settle(e, id, keys[i]));
      assert.equal(
        runs.map((r) => r.status),
        Array(9).fill('completed'),
      );
      // Flight intervals [startedAt, completedAt): at any start, at most two others are in flight.
      for (const r of runs) {
        const at = ms(r.startedAt);
        const others = runs.filter((o) => o !== r && ms(o.startedAt) <= at && ms(o.completedAt) > at);
        assert.ok(others.length <= 2, `${others.length + 1} runs in flight at ${r.startedAt}`);
      }
      assert.equal(await wallet(e, 'bob'), { balance: '3.749000', held: '0.000000' }, 'five runs at 0.2502');
      assert.equal(await wallet(e, 'alice'), { balance: '9.999200', held: '0.000000' }, 'the owner pays four times two steps');
      for (const id of ids) assert.equal((await signedHook(e, id, 'run.completed')).type, 'run.completed');
      assert.is(e.hooks.length, 9, 'one webhook per run');
    });
  });

  scenario(engine, 'an account at its maxConcurrentRuns waits while other accounts run', async () => {
    await withE2e(engine, {}, async (e) => {
      const d1 = await startRun(e, W_DELAY, {}, 'wr_test_dave');
      await waitRun(e, d1, inFlight, 'in flight', 'wr_test_dave');
      const d2 = await startRun(e, W_DELAY, {}, 'wr_test_dave');
      const b1 = await startRun(e, W_DELAY);
      await waitStarted(e, b1);
      const waiting = await getRun(e, d2, 'wr_test_dave');
      const first = await getRun(e, d1, 'wr_test_dave');
      if (first.completedAt === null) {
        assert.is(waiting.status, 'pending', "dave's second run waits for his first");
        assert.is(waiting.queue?.state, 'waiting');
      }
      const [r1, r2, rb] = [await settle(e, d1, 'wr_test_dave'), await settle(e, d2, 'wr_test_dave'), await settle(e, b1)];
      assert.equal([r1.status, r2.status, rb.status], ['completed', 'completed', 'completed']);
      assert.ok(ms(r2.startedAt) >= ms(r1.completedAt), "dave's runs one at a time");
      assert.ok(ms(rb.startedAt) < ms(r1.completedAt), "bob's run did not wait for dave's");
      assert.equal(await wallet(e, 'dave'), { balance: '9.499600', held: '0.000000' });
    });
  });

  scenario(engine, 'cancelling a run that waits in the queue: cancelled, not charged, signed run.cancelled, and the next one moves up', async () => {
    await withE2e(engine, { env: { RUN_CAPACITY: '1' } }, async (e) => {
      const a = await startRun(e, W_LONG_DELAY);
      await waitRun(e, a, inFlight, 'in flight');
      const b = await startRun(e, W_DELAY);
      const c = await startRun(e, W_DELAY);
      assert.equal((await e.t.call('POST', `/runs/${b}/cancel`)).body, { id: b, status: 'cancelled', cancelRequested: true });
      const cancelled = await getRun(e, b);
      assert.equal([cancelled.status, cancelled.billingStatus, cancelled.displayedChargeUsd, cancelled.startedAt], ['cancelled', 'not_charged', null, null]);
      assert.equal((await signedHook(e, b, 'run.cancelled')).data, cancelled);
      const [ra, rc] = [await settle(e, a), await settle(e, c)];
      assert.equal([ra.status, rc.status], ['completed', 'completed']);
      assert.ok(ms(rc.startedAt) >= ms(ra.completedAt), 'the next run took the slot after the first');
      assert.equal(shape(await runEvents(e, b)), ['run.queued', 'run.cancelled'], 'the cancelled run never started');
      assert.equal((await getRun(e, b)).status, 'cancelled', 'and stayed cancelled');
      assert.equal(await wallet(e, 'bob'), { balance: '4.499600', held: '0.000000' }, 'two runs charged');
    });
  });

  scenario(engine, 'a run waiting past QUEUE_MAX_WAIT_SECONDS fails, not charged, with a signed run.failed webhook', async () => {
    await withE2e(engine, { env: { RUN_CAPACITY: '1', QUEUE_MAX_WAIT_SECONDS: '1' } }, async (e) => {
      const a = await startRun(e, W_LONG_DELAY);
      await waitRun(e, a, inFlight, 'in flight');
      const b = await startRun(e, W_DELAY);
      const run = await settle(e, b);
      assert.is(run.status, 'failed');
      assert.is(run.reason, 'the run waited too long for capacity');
      assert.is(run.billingStatus, 'not_charged');
      assert.is(run.displayedChargeUsd, null);
      assert.is(run.startedAt, null);
      assert.equal(shape(await runEvents(e, b)), ['run.queued', 'run.failed']);
      assert.equal((await signedHook(e, b, 'run.failed')).data, run);
      const first = await settle(e, a);
      assert.is(first.status, 'completed', 'the run holding the slot is not affected');
      assert.ok(ms(run.completedAt) < ms(first.completedAt), 'it failed while still waiting');
      assert.equal(await wallet(e, 'bob'), { balance: '4.749800', held: '0.000000' }, 'only the first run is charged');
    });
  });
}

test.run();
