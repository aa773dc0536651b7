import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { W_SUMMARY } from './helpers/catalog.ts';
import { engineCases, getRun, scenario, settle, withE2e } from './helpers/harness.ts';

/**
 * POST /runs/batch on every engine (docs/design/batch-runs.md): the accepted items run to the end as
 * runs started by POST /runs do; a refused item starts nothing; a replayed batch starts nothing again.
 */

for (const engine of engineCases('rest e2e: batch')) {
  scenario(engine, "a batch's accepted runs complete; its refused item starts nothing; its replay answers the same runs", async () => {
    await withE2e(engine, {}, async (e) => {
      const body = {
        runs: [
          { workflow: W_SUMMARY, inputs: { topic: 'owls' }, metadata: { batch: 'e2e' } },
          { workflow: W_SUMMARY, inputs: { colour: 'red' } },
          { workflow: W_SUMMARY, inputs: { topic: 'bees' } },
        ],
      };
      const res = await e.t.call('POST', '/runs/batch', { body, headers: { 'idempotency-key': `e2e-${engine.name}` } });
      assert.is(res.status, 202, res.text);
      assert.is(res.body.accepted, 2);
      assert.is(res.body.items[1].error.code, 'invalid_inputs');
      const [owls, , bees] = res.body.items;
      for (const [item, topic] of [
        [owls, 'owls'],
        [bees, 'bees'],
      ] as const) {
        const run = await settle(e, item.run.id);
        assert.is(run.status, 'completed', JSON.stringify(run));
        assert.equal(run.outputs, [{ nodeId: 'out', name: 'Summary', type: 'text', value: `About ${topic}` }]);
      }
      assert.equal((await getRun(e, owls.run.id)).metadata, { batch: 'e2e' });
      const replay = await e.t.call('POST', '/runs/batch', { body, headers: { 'idempotency-key': `e2e-${engine.name}` } });
      assert.equal(replay.body, res.body);
      const listed = await e.t.call('GET', '/runs?metadata[batch]=e2e');
      assert.is(listed.body.runs.length, 1);
    });
  });
}

test.run();
