import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { startGateServer, type GateServer } from '../../helpers/gate-server.ts';
import { W_TYPED } from './helpers/catalog.ts';
import { engineCases, scenario, withE2e, type E2e } from './helpers/harness.ts';

/**
 * The order of admission (docs/design/flow-control.md#the-order-of-admission) on a real engine, Temporal
 * included: behind a backlog of 500 runs accepted by one batch, key B's one run and a `high` run are
 * admitted within one turn. Every run calls a local gate that holds it in flight until the test releases
 * it; the test releases one run at a time and waits for the next to arrive, so the gate's arrivals are the
 * order in which the engine's rounds admitted the runs.
 */

const CAPACITY = 4;
const BACKLOG = 500;

async function accept(e: E2e, key: string, items: Record<string, unknown>[]): Promise<string[]> {
  const res = await e.t.call('POST', '/runs/batch', { key, body: { runs: items } });
  assert.is(res.status, 202, res.text);
  assert.is(res.body.accepted, items.length);
  return res.body.items.map((i: { run: { id: string } }) => i.run.id);
}

const gated = (gate: GateServer, name: string, extra: Record<string, unknown> = {}) => ({
  workflow: W_TYPED,
  inputs: { n: 1, site: gate.url(name) },
  ...extra,
});

/** Releases the oldest run in flight, one at a time, until `name` arrived; the arrivals then. */
async function releaseUntil(gate: GateServer, name: string): Promise<string[]> {
  for (let n = gate.arrivals.length; !gate.arrivals.includes(name); n++) {
    assert.ok(n < BACKLOG, `${name} never arrived`);
    gate.release(gate.arrivals[n - CAPACITY]!);
    await gate.arrived(n + 1, 60_000);
  }
  return [...gate.arrivals];
}

for (const engine of engineCases('rest e2e: flow control')) {
  scenario(engine, `key B’s one run behind key A’s ${BACKLOG} queued is admitted within one turn of A, long before A’s 50th`, async () => {
    const gate = await startGateServer();
    try {
      await withE2e(engine, { env: { RUN_CAPACITY: String(CAPACITY) } }, async (e) => {
        await accept(
          e,
          'wr_test_bob',
          Array.from({ length: BACKLOG }, (_, i) => gated(gate, `a${i}`, { concurrencyKey: 'customer-a' })),
        );
        await gate.arrived(CAPACITY, 60_000);
        await accept(e, 'wr_test_bob', [gated(gate, 'b', { concurrencyKey: 'customer-b' })]);
        const order = await releaseUntil(gate, 'b');
        const aBeforeB = order.slice(CAPACITY, order.indexOf('b'));
        // B's pass is the clock + 1: behind A's head and the run of A that shares its pass, never more.
        assert.ok(aBeforeB.length <= 2, `A's runs admitted after B's acceptance, before B: ${aBeforeB.join(', ')}`);
        assert.ok(order.indexOf('b') < 49, `B before A's 50th run (order: ${order.join(', ')})`);
        const aAfter = order.slice(CAPACITY).filter((n) => n !== 'b');
        assert.equal(
          aAfter,
          aAfter.map((_, i) => `a${CAPACITY + i}`),
          'A’s runs keep their order',
        );
        gate.openAll();
      });
    } finally {
      await gate.close();
    }
  });

  scenario(engine, `a high run behind ${BACKLOG} normal ones is admitted in the next round`, async () => {
    const gate = await startGateServer();
    try {
      await withE2e(engine, { env: { RUN_CAPACITY: String(CAPACITY) } }, async (e) => {
        await accept(
          e,
          'wr_test_alice',
          Array.from({ length: BACKLOG }, (_, i) => gated(gate, `n${i}`)),
        );
        await gate.arrived(CAPACITY, 60_000);
        await accept(e, 'wr_test_alice', [gated(gate, 'high', { priority: 'high' })]);
        const order = await releaseUntil(gate, 'high');
        assert.is(order.indexOf('high'), CAPACITY, `the first run admitted after it (order: ${order.join(', ')})`);
        gate.openAll();
      });
    } finally {
      await gate.close();
    }
  });
}

test.run();
