import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { Client, Connection } from '@temporalio/client';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { W_LONG_DELAY, W_SUMMARY, W_TYPED } from './helpers/catalog.ts';
import {
  assertStaysPut,
  engineCases,
  getRun,
  hookTypes,
  scenario,
  settle,
  signedHook,
  waitRun,
  waitStatus,
  wallet,
  withE2e,
  type E2e,
} from './helpers/harness.ts';
import { waitFor } from '../../helpers/wait-for.ts';

/**
 * Runs in sets on every engine (docs/design/runs-in-sets.md): one cancel by a metadata filter ends runs
 * queued, running (a slow HTTP step) and suspended (a delay) exactly as the single cancel does (not
 * charged, signed run.cancelled webhook, nothing later changes them), and on Temporal their workflows
 * close as Canceled; a replay of a run with a password input starts a new run once the password is
 * given again.
 */

async function start(e: E2e, workflow: string, inputs: Record<string, unknown>, metadata: Record<string, string>): Promise<string> {
  const res = await e.t.call('POST', '/runs', { body: { workflow, inputs, metadata } });
  assert.is(res.status, 202, res.text);
  return res.body.run.id;
}

/** The Temporal status of the run's workflow (temporal engine only). */
async function workflowStatus(address: string, runId: string): Promise<string> {
  const connection = await Connection.connect({ address });
  try {
    return (await new Client({ connection }).workflow.getHandle(runId).describe()).status.name;
  } finally {
    await connection.close();
  }
}

for (const engine of engineCases('rest e2e: runs in sets')) {
  scenario(engine, 'one cancel by metadata filter ends runs queued, running and suspended; nothing charged; Temporal workflows Canceled', async () => {
    const waiting: ServerResponse[] = [];
    const site = createServer((_req: IncomingMessage, res: ServerResponse) => void waiting.push(res));
    await new Promise<void>((r) => site.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(site.address() as { port: number }).port}/slow`;
    try {
      await withE2e(engine, { env: { RUN_CAPACITY: '2' } }, async (e) => {
        const before = await wallet(e, 'bob');
        const batch = { customer: 'acme' };
        const suspended = await start(e, W_LONG_DELAY, {}, batch);
        await waitStatus(e, suspended, 'suspended');
        const running = await start(e, W_TYPED, { n: 1, site: url, token: 'tok' }, batch);
        await waitRun(e, running, () => waiting.length > 0, 'calling the slow site');
        const queued = [await start(e, W_SUMMARY, { topic: 'q1' }, batch), await start(e, W_SUMMARY, { topic: 'q2' }, batch)];
        const other = await start(e, W_SUMMARY, { topic: 'other' }, { customer: 'globex' });
        assert.is((await getRun(e, queued[0]!)).status, 'pending');

        const dry = await e.t.call('POST', '/runs/cancel?dryRun=true', { body: { filter: { metadata: batch } } });
        assert.equal([dry.body.matched, dry.body.cancelled, dry.body.alreadyTerminal], [4, 4, 0]);
        const res = await e.t.call('POST', '/runs/cancel', { body: { filter: { metadata: batch } } });
        assert.is(res.status, 200, res.text);
        assert.equal(res.body, { dryRun: false, matched: 4, cancelled: 4, alreadyTerminal: 0, nextCursor: null });

        for (const id of [suspended, running, ...queued]) {
          const run = await getRun(e, id);
          assert.is(run.status, 'cancelled', id);
          assert.is(run.billingStatus, 'not_charged');
          assert.equal((await signedHook(e, id, 'run.cancelled')).data, run);
        }
        assert.is.not((await getRun(e, other)).status, 'cancelled', 'a run the filter does not match is not cancelled');
        await settle(e, other);
        // The slow site answers after all, the delay's timer comes due: nothing changes a cancelled run.
        for (const r of waiting) if (!r.destroyed) r.writeHead(200, { 'content-type': 'text/plain' }).end('late');
        await assertStaysPut(e, suspended, 3_500);
        for (const id of [suspended, running, ...queued]) assert.equal(hookTypes(e, id), ['run.cancelled'], 'one terminal webhook');
        const after = await wallet(e, 'bob');
        assert.is(after.held, before.held, 'no hold left behind');

        if (engine.name === 'temporal') {
          for (const id of [suspended, running, ...queued]) {
            await waitFor(
              `the workflow of ${id} closed as Canceled`,
              async () => (await workflowStatus(engine.address!, id)) === 'CANCELLED',
              engine.timeoutMs,
            );
          }
        }
      });
    } finally {
      site.closeAllConnections();
      site.close();
    }
  });

  scenario(engine, 'a replay of an ended run with a password input: refused until the password is given again, then runs', async () => {
    await withE2e(engine, {}, async (e) => {
      const original = await start(e, W_TYPED, { n: 3, token: 'first' }, { job: 'nightly' });
      await settle(e, original);
      const refused = await e.t.call('POST', `/runs/${original}/replay`, { body: {} });
      assert.is(refused.status, 400, refused.text);
      assert.equal(
        refused.body.error.details.map((d: { input: string }) => d.input),
        ['token'],
      );
      const res = await e.t.call('POST', `/runs/${original}/replay`, { body: { inputs: { token: 'again' } } });
      assert.is(res.status, 202, res.text);
      const replay = await settle(e, res.body.run.id);
      assert.is(replay.replayOf, original);
      assert.equal(replay.metadata, { job: 'nightly' });
      assert.equal(replay.outputs, (await getRun(e, original)).outputs, 'the same inputs give the same outputs');
    });
  });
}

test.run();
