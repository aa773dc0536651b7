import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { startProviderStub } from '../../helpers/provider-stub.ts';
import { W_ISSUES, W_LIMIT, W_LLM, W_SUMMARY } from './helpers/catalog.ts';
import {
  assertLogSound,
  engineCases,
  getRun,
  openaiEnv,
  runEvents,
  scenario,
  setWallet,
  settle,
  shape,
  signedHook,
  wallet,
  withE2e,
} from './helpers/harness.ts';

/**
 * A run's whole life over HTTP, on every engine: funding by bundle and by wallet with the exact
 * charges, outputs and the event log, insufficient funds, the compute limit, a failing node
 * (`completed_with_issues`), and the signed webhook of each terminal event.
 */

for (const engine of engineCases('rest e2e: lifecycle')) {
  scenario(engine, 'a bundle-funded run completes with outputs, the bundle price and a signed run.completed webhook', async () => {
    await withE2e(engine, {}, async (e) => {
      const res = await e.t.call('POST', '/runs', { body: { workflow: W_SUMMARY, inputs: { topic: 'owls' } } });
      assert.is(res.status, 202);
      const run = await settle(e, res.body.run.id);
      assert.is(run.status, 'completed');
      assert.is(run.outcome, 'completed');
      assert.is(run.billingStatus, 'settled');
      assert.is(run.displayedChargeUsd, 0.2);
      assert.equal(run.outputs, [{ nodeId: 'out', name: 'Summary', type: 'text', value: 'About owls' }]);
      const events = await runEvents(e, run.id);
      assertLogSound(events);
      assert.equal(shape(events), [
        'run.queued',
        'run.preparing',
        'run.started',
        'node.started:say',
        'node.completed:say',
        'node.completed:out',
        'run.completed',
      ]);
      const text = events
        .filter((ev) => ev.type === 'node.output.delta' && ev.nodeId === 'say')
        .map((ev) => ev.data.text)
        .join('');
      assert.is(text, 'About owls');
      assert.equal(await wallet(e, 'bob'), { balance: '5.000000', held: '0.000000' }, 'the wallet is not touched');
      const [b] = await e.t.deps.orm.em.fork().execute<{ runs_left: number }[]>(`select runs_left from bundles`);
      assert.is(Number(b!.runs_left), 1, 'one bundle run consumed');
      const hook = await signedHook(e, run.id, 'run.completed');
      assert.equal(hook.data, run);
      const shown = await e.t.call('GET', `/runs/${run.id}`);
      const envelope = `{"type":"run.completed","timestamp":${JSON.stringify(hook.timestamp)},"data":${shown.text}}`;
      assert.is(hook.raw, envelope, 'the body carries the bytes GET /runs/{id} answers');
      assert.ok(Date.parse(hook.timestamp) >= Date.parse(run.completedAt), "the timestamp is the run's end, not before it");
    });
  });

  scenario(engine, 'a wallet run is charged the creator price plus its steps, exactly, and the hold is released', async () => {
    await withE2e(engine, {}, async (e) => {
      await setWallet(e, 'carol', '1');
      const res = await e.t.call('POST', '/runs', { key: 'wr_test_carol', body: { workflow: W_SUMMARY, inputs: { topic: 'bees' } } });
      const run = await settle(e, res.body.run.id, 'wr_test_carol');
      assert.is(run.status, 'completed');
      assert.is(run.displayedChargeUsd, 0.2502);
      assert.equal(run.outputs, [{ nodeId: 'out', name: 'Summary', type: 'text', value: '3 points about bees (formal)!' }]);
      assert.equal(await wallet(e, 'carol'), { balance: '0.749800', held: '0.000000' });
      assert.equal((await signedHook(e, run.id, 'run.completed')).data, run);
    });
  });

  scenario(engine, 'a service-hosted LLM step streams its text into the output and is charged its tokens', async () => {
    const stub = await startProviderStub({ chunks: ['Owls ', 'hunt ', 'at night.'] });
    try {
      await withE2e(engine, { env: openaiEnv(stub) }, async (e) => {
        const id = (await e.t.call('POST', '/runs', { body: { workflow: W_LLM, inputs: {} } })).body.run.id;
        const run = await settle(e, id);
        assert.is(run.status, 'completed', run.reason);
        assert.equal(
          run.outputs.map((o: any) => o.value),
          ['Owls hunt at night.'],
        );
        // 0.25 + two steps + 11 input tokens at 0.15 and 7 output tokens at 0.60 per million.
        assert.is(run.displayedChargeUsd, 0.250206);
        assert.equal(await wallet(e, 'bob'), { balance: '4.749794', held: '0.000000' });
        const events = await runEvents(e, id);
        assertLogSound(events);
        assert.is(
          events
            .filter((ev) => ev.type === 'node.output.delta' && ev.nodeId === 'llm')
            .map((ev) => ev.data.text)
            .join(''),
          'Owls hunt at night.',
        );
        assert.is(stub.requests.length, 1, 'one provider call');
      });
    } finally {
      await stub.close();
    }
  });

  scenario(engine, 'insufficient funds: 202, then failed and not charged, with a signed run.failed webhook', async () => {
    await withE2e(engine, {}, async (e) => {
      await setWallet(e, 'carol', '0.0001');
      const res = await e.t.call('POST', '/runs', { key: 'wr_test_carol', body: { workflow: W_SUMMARY, inputs: { topic: 'x' } } });
      assert.is(res.status, 202);
      const run = await settle(e, res.body.run.id, 'wr_test_carol');
      assert.is(run.status, 'failed');
      assert.match(run.reason, /insufficient funds/);
      assert.is(run.billingStatus, 'not_charged');
      assert.is(run.displayedChargeUsd, null);
      assert.equal(await wallet(e, 'carol'), { balance: '0.000100', held: '0.000000' });
      assert.not.ok(
        (await runEvents(e, run.id, 'wr_test_carol')).some((ev) => ev.type === 'node.started'),
        'no step ran',
      );
      assert.equal((await signedHook(e, run.id, 'run.failed')).data, run);
    });
  });

  scenario(engine, 'the step that would cross the compute limit does not start: failed, charged the compute used', async () => {
    await withE2e(engine, {}, async (e) => {
      const id = (await e.t.call('POST', '/runs', { body: { workflow: W_LIMIT, inputs: {} } })).body.run.id;
      const run = await settle(e, id);
      assert.is(run.status, 'failed');
      assert.is(run.reason, 'compute limit reached');
      assert.is(run.displayedChargeUsd, 0.0002, 'two steps, no creator price');
      assert.is(run.billingStatus, 'settled');
      assert.equal(run.outputs, []);
      const events = await runEvents(e, id);
      assertLogSound(events);
      assert.equal(shape(events).slice(3), ['node.started:s1', 'node.completed:s1', 'node.started:s2', 'node.completed:s2', 'run.failed']);
      assert.equal(await wallet(e, 'bob'), { balance: '4.999800', held: '0.000000' });
      assert.equal((await signedHook(e, id, 'run.failed')).data, run);
    });
  });

  scenario(engine, 'a failing node skips its dependents: completed_with_issues, charged the completed steps only', async () => {
    await withE2e(engine, {}, async (e) => {
      const id = (await e.t.call('POST', '/runs', { body: { workflow: W_ISSUES, inputs: {} } })).body.run.id;
      const run = await settle(e, id);
      assert.is(run.status, 'completed');
      assert.is(run.outcome, 'completed_with_issues');
      assert.equal(run.outputs, [{ nodeId: 'out_other', name: 'Other', type: 'text', value: 'fine' }]);
      assert.is(run.displayedChargeUsd, 0.0002);
      const events = await runEvents(e, id);
      assertLogSound(events);
      assert.equal(events.find((ev) => ev.type === 'node.failed')?.data, { reason: 'invalid JSON in parsed' });
      assert.equal(
        events.filter((ev) => ev.type === 'node.skipped').map((ev) => [ev.nodeId, ev.data.reason]),
        [['out_parsed', 'upstream_failed']],
      );
      assert.equal(await wallet(e, 'bob'), { balance: '4.999800', held: '0.000000' });
      const hook = await signedHook(e, id, 'run.completed');
      assert.equal(hook.data, run);
      assert.equal(await getRun(e, id), run, 'nothing changes after the terminal state');
    });
  });
}

test.run();
