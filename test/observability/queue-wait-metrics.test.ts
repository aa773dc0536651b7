import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { admitQueuedRuns } from '../../src/runs/admit-runs.ts';
import { startTestApp } from '../helpers/app.ts';
import { moved, scrape, type Scrape } from '../helpers/metrics.ts';
import { W_SUMMARY } from '../rest/e2e/helpers/catalog.ts';

/**
 * The queue's wait per priority and per concurrency key through GET /metrics (docs/operations.md,
 * docs/design/flow-control.md#metrics): the histogram of queued → admitted by priority and keyed, and the
 * one series naming the key waiting longest. A NullEngine never admits on its own: the test runs the
 * rounds, so each wait is known to within the test's own sleeps.
 */

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const WAIT = 'wr_run_queue_wait_seconds';
const LONGEST = 'wr_concurrency_key_longest_wait_seconds';

/** How many observations of the wait histogram fell in the bucket `le` between two scrapes. */
function movedBucket(before: Scrape, after: Scrape, le: string, labels: Record<string, string>): number {
  const at = (s: Scrape) =>
    (s.families.get(WAIT)?.samples ?? [])
      .filter((x) => x.name === `${WAIT}_bucket` && x.labels.le === le && Object.entries(labels).every(([k, v]) => x.labels[k] === v))
      .reduce((n, x) => n + x.value, 0);
  return at(after) - at(before);
}

test('the wait histogram counts each admitted run by priority and keyed; the longest-waiting key is one series, gone once admitted', async () => {
  const t = await startTestApp();
  try {
    const start = async (key: string, extra: Record<string, unknown>) => {
      const res = await t.call('POST', '/runs', { key, body: { workflow: W_SUMMARY, inputs: { topic: 'wait' }, ...extra } });
      assert.is(res.status, 202, res.text);
      return res.body.run.id as string;
    };
    const url = `${t.url}/metrics`;
    const empty = await scrape(url);
    assert.is(empty.families.get(LONGEST)?.samples.length ?? 0, 0, 'no series while no keyed run waits');

    // A key with a quote and a backslash: a caller's string, escaped in the exposition.
    const key = 'tenant "a"\\1';
    await start('wr_test_alice', { concurrencyKey: key });
    await start('wr_test_alice', { concurrencyKey: key });
    await sleep(1100);
    await start('wr_test_bob', { concurrencyKey: 'tenant-b' });
    await start('wr_test_bob', {});
    await start('wr_test_alice', { priority: 'high' });

    const before = await scrape(url);
    const longest = before.families.get(LONGEST)!.samples;
    assert.is(longest.length, 1, 'one series, whatever the number of keys');
    assert.equal(longest[0]!.labels, { account: 'alice', concurrency_key: key }, 'the key whose oldest run waited longest, with its account');
    assert.ok(longest[0]!.value >= 1 && longest[0]!.value < 30, `its wait in seconds (${longest[0]!.value})`);

    assert.is(movedBucket(empty, before, '+Inf', {}), 0, 'nothing observed before a run is admitted');
    assert.is((await admitQueuedRuns(t.deps, { capacity: 100 })).length, 5, 'one round admits the five');
    const after = await scrape(url);
    const normalKeyed = { priority: 'normal', keyed: 'true' };
    assert.is(moved(before, after, WAIT, normalKeyed), 3, 'three keyed normal runs, whatever their keys');
    assert.is(moved(before, after, WAIT, { priority: 'normal', keyed: 'false' }), 1);
    assert.is(moved(before, after, WAIT, { priority: 'high', keyed: 'false' }), 1);
    assert.is(moved(before, after, WAIT), 5, 'no other label set moved');
    assert.ok(movedBucket(before, after, '1', normalKeyed) <= 1, 'alice’s two keyed runs waited more than a second');
    const waited = (s: Scrape) => (s.families.get(WAIT)?.samples ?? []).filter((x) => x.name === `${WAIT}_sum`).reduce((n, x) => n + x.value, 0);
    assert.ok(waited(after) - waited(before) >= 2.2, `the waits add up to at least alice’s two (${waited(after) - waited(before)})`);
    for (const s of after.families.get(WAIT)!.samples)
      assert.equal(Object.keys(s.labels).sort(), s.labels.le ? ['keyed', 'le', 'priority'] : ['keyed', 'priority']);
    assert.is(after.families.get(LONGEST)?.samples.length ?? 0, 0, 'no keyed run waits: no series');
  } finally {
    await t.close();
  }
});

test.run();
