import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { startProviderStub } from '../../helpers/provider-stub.ts';
import { W_BYOK, W_DELAY, W_LLM, W_LONG_DELAY, W_TYPED } from './helpers/catalog.ts';
import {
  assertLogSound,
  assertStaysPut,
  engineCases,
  getRun,
  hookTypes,
  openaiEnv,
  runEvents,
  scenario,
  settle,
  shape,
  signedHook,
  sleep,
  startRun,
  supplyCredentials,
  waitRun,
  waitStatus,
  wallet,
  withE2e,
  type E2e,
} from './helpers/harness.ts';

/**
 * Suspensions and cancellation over HTTP, on every engine: a delay suspends the run (`wait_timer`) and
 * it resumes by itself; a BYOK run without a key waits for credentials (`wait_signal`) until GraphQL
 * `supplyRunCredentials` resumes it; a cancel during a slow HTTP step, during an LLM stream and during
 * a timer ends the run cancelled, not charged, with a signed `run.cancelled` webhook, and nothing that
 * finishes later changes it.
 */

/** Cancels through the API and checks the answer, the webhook, the money and that the run stays put. */
async function cancelAndCheck(e: E2e, id: string, walletBefore: { balance: string; held: string }): Promise<void> {
  const cancel = await e.t.call('POST', `/runs/${id}/cancel`);
  assert.equal(cancel.body, { id, status: 'cancelled', cancelRequested: true });
  const hook = await signedHook(e, id, 'run.cancelled');
  assert.is(hook.data.status, 'cancelled');
  const run = await getRun(e, id);
  assert.is(run.status, 'cancelled');
  assert.is(run.billingStatus, 'not_charged');
  assert.is(run.displayedChargeUsd, null);
  assert.equal(hook.data, run);
  assert.equal(await wallet(e, 'bob'), walletBefore, 'not charged, nothing held');
  const again = await e.t.call('POST', `/runs/${id}/cancel`);
  assert.equal(again.body, { id, status: 'cancelled', cancelRequested: false });
}

async function assertEndsCancelled(e: E2e, id: string): Promise<void> {
  const events = await runEvents(e, id);
  assertLogSound(events);
  assert.is(events.at(-1)!.type, 'run.cancelled');
  assert.equal(hookTypes(e, id), ['run.cancelled'], 'one terminal webhook');
}

for (const engine of engineCases('rest e2e: suspensions and cancel')) {
  scenario(engine, 'a delay suspends the run with wait_timer on a durable timer; it resumes by itself and completes', async () => {
    await withE2e(engine, {}, async (e) => {
      const t0 = Date.now();
      const id = await startRun(e, W_DELAY);
      const suspended = await waitStatus(e, id, 'suspended');
      assert.is(suspended.suspended, true);
      const run = await settle(e, id);
      assert.ok(Date.now() - t0 >= 1_000, 'the delay lasted at least its second');
      assert.is(run.status, 'completed');
      assert.equal(run.outputs, [{ nodeId: 'out', name: 'Result', type: 'text', value: 'before and after' }]);
      assert.is(run.displayedChargeUsd, 0.2502);
      const events = await runEvents(e, id);
      assertLogSound(events);
      assert.equal(shape(events), [
        'run.queued',
        'run.preparing',
        'run.started',
        'node.started:a',
        'node.completed:a',
        'node.started:wait',
        'run.suspended',
        'run.resumed',
        'node.completed:wait',
        'node.started:b',
        'node.completed:b',
        'node.completed:out',
        'run.completed',
      ]);
      assert.equal(events.find((ev) => ev.type === 'run.suspended')!.data, { status: 'suspended', reason: 'wait_timer' });
      assert.equal(events.find((ev) => ev.type === 'run.resumed')!.data, { status: 'running' });
      const suspendedAt = Date.parse(events.find((ev) => ev.type === 'run.suspended')!.ts);
      const resumedAt = Date.parse(events.find((ev) => ev.type === 'run.resumed')!.ts);
      assert.ok(resumedAt - suspendedAt >= 900, `suspended for the delay (${resumedAt - suspendedAt} ms)`);
      assert.equal(await wallet(e, 'bob'), { balance: '4.749800', held: '0.000000' });
      assert.equal((await signedHook(e, id, 'run.completed')).data, run);
    });
  });

  scenario(engine, 'a BYOK run without a key waits with wait_signal; supplyRunCredentials resumes it and it completes', async () => {
    const stub = await startProviderStub({ chunks: ['Hi', ' there'] });
    try {
      await withE2e(engine, { env: { OPENAI_BASE_URL: stub.baseURLFor('openai') } }, async (e) => {
        const id = await startRun(e, W_BYOK);
        const suspended = await waitStatus(e, id, 'suspended');
        const waiting = (await runEvents(e, id)).at(-1)!;
        assert.equal([waiting.type, waiting.data], ['run.suspended', { status: 'suspended', reason: 'wait_signal' }]);
        await sleep(500);
        assert.equal(await getRun(e, id), suspended, 'it waits: no timer resumes it');
        assert.is(stub.requests.length, 0, 'no provider call without a key');
        const supplied = await supplyCredentials(e, id, 'openai', 'sk-buyer-key');
        assert.equal(supplied, { id, status: 'RUNNING', suspended: false }, 'the answer already shows the run resumed');
        const run = await settle(e, id);
        assert.is(run.status, 'completed');
        assert.equal(
          run.outputs.map((o: any) => o.value),
          ['Hi there'],
        );
        assert.is(run.displayedChargeUsd, 0.2502, 'price + two steps; BYOK usage is on the buyer');
        assert.is(stub.requests.length, 1);
        assert.is(stub.requests[0]!.headers.authorization, 'Bearer sk-buyer-key');
        const events = await runEvents(e, id);
        assertLogSound(events);
        assert.equal(shape(events).slice(3), [
          'node.started:intro',
          'node.completed:intro',
          'node.started:llm',
          'run.suspended',
          'run.resumed',
          'node.completed:llm',
          'node.completed:out',
          'run.completed',
        ]);
        assert.not.match(JSON.stringify(events), 'sk-buyer-key');
        assert.equal((await signedHook(e, id, 'run.completed')).data, run);
      });
    } finally {
      await stub.close();
    }
  });

  scenario(engine, 'cancel during a slow HTTP step: cancelled, not charged, signed run.cancelled, and the late answer changes nothing', async () => {
    const waiting: ServerResponse[] = [];
    const site = createServer((_req: IncomingMessage, res: ServerResponse) => void waiting.push(res));
    await new Promise<void>((r) => site.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(site.address() as { port: number }).port}/slow`;
    try {
      await withE2e(engine, {}, async (e) => {
        const before = await wallet(e, 'bob');
        const id = await startRun(e, W_TYPED, { n: 1, site: url, token: 'tok' });
        await waitRun(e, id, () => waiting.length > 0, 'calling the slow site');
        assert.is((await getRun(e, id)).status, 'running');
        await cancelAndCheck(e, id, before);
        // The site answers after all: the step's result must not be recorded on the cancelled run.
        for (const res of waiting) if (!res.destroyed) res.writeHead(200, { 'content-type': 'text/plain' }).end('late');
        await assertStaysPut(e, id, 1_500);
        await assertEndsCancelled(e, id);
      });
    } finally {
      site.closeAllConnections();
      site.close();
    }
  });

  scenario(engine, 'cancel during an LLM stream aborts it: cancelled, not charged, no delta after run.cancelled', async () => {
    const stub = await startProviderStub({ chunks: Array.from({ length: 60 }, (_, i) => `w${i} `), delayMsBetweenChunks: 200 });
    try {
      await withE2e(engine, { env: openaiEnv(stub) }, async (e) => {
        const before = await wallet(e, 'bob');
        const id = await startRun(e, W_LLM);
        const end = Date.now() + engine.timeoutMs;
        while (!(await runEvents(e, id)).some((ev) => ev.type === 'node.output.delta' && ev.nodeId === 'llm')) {
          if (Date.now() > end) throw new Error('the LLM stream never started');
          await sleep(50);
        }
        await cancelAndCheck(e, id, before);
        await assertStaysPut(e, id, 1_500);
        await assertEndsCancelled(e, id);
        const deltas = (await runEvents(e, id)).filter((ev) => ev.type === 'node.output.delta' && ev.nodeId === 'llm');
        assert.ok(deltas.length < 60, 'the stream did not run to its end');
      });
    } finally {
      await stub.close();
    }
  });

  scenario(engine, 'cancel while waiting for credentials: cancelled, not charged; credentials supplied later are not stored and resume nothing', async () => {
    const stub = await startProviderStub({ chunks: ['Hi'] });
    try {
      await withE2e(engine, { env: { OPENAI_BASE_URL: stub.baseURLFor('openai') } }, async (e) => {
        const before = await wallet(e, 'bob');
        const id = await startRun(e, W_BYOK);
        await waitStatus(e, id, 'suspended');
        await cancelAndCheck(e, id, before);
        assert.equal(await supplyCredentials(e, id, 'openai', 'sk-late'), { id, status: 'CANCELLED', suspended: false }, 'returned unchanged');
        const [secrets] = await e.t.deps.orm.em.fork().execute<{ n: number }[]>(`select count(*)::int as n from run_secrets where run_id = ?`, [id]);
        assert.is(secrets!.n, 0, 'nothing stored for a cancelled run');
        await assertStaysPut(e, id, 1_000);
        await assertEndsCancelled(e, id);
        assert.is(stub.requests.length, 0, 'the provider was never called');
      });
    } finally {
      await stub.close();
    }
  });

  scenario(engine, 'cancel during a timer: cancelled, not charged, signed run.cancelled; the timer firing later changes nothing', async () => {
    await withE2e(engine, {}, async (e) => {
      const before = await wallet(e, 'bob');
      const id = await startRun(e, W_LONG_DELAY);
      await waitStatus(e, id, 'suspended');
      await cancelAndCheck(e, id, before);
      await assertStaysPut(e, id, 3_500); // past the delay's due time
      await assertEndsCancelled(e, id);
      assert.not.ok(
        (await runEvents(e, id)).some((ev) => ev.nodeId === 'b'),
        'nothing after the delay ran',
      );
    });
  });
}

test.run();
