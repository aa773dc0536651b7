import { randomBytes, randomUUID } from 'node:crypto';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { Orm } from '../../src/db/orm.ts';
import { EmbeddedEngine } from '../../src/engine/embedded/embedded-engine.ts';
import { Sealer } from '../../src/security/crypto.ts';
import { authenticateKey } from '../../src/services/auth/authenticate-key.ts';
import type { Deps } from '../../src/runs/deps.ts';
import { getRun } from '../../src/runs/get-run.ts';
import { startRun } from '../../src/runs/start-run.ts';
import { testOrm } from '../helpers/db.ts';
import { eventually, startLiveHarness, workflowClosed } from '../helpers/live-temporal.ts';
import { temporalAddress } from '../helpers/temporal.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { hangingServer, engineDeps, seedBuyerCatalog, withEmbeddedEngine } from '../helpers/engine-fixtures.ts';

/**
 * Cancel-After (docs/design/run-metadata.md#deadline) on both engines: a run past its deadline is
 * cancelled as the API's cancel would (not charged, run.cancelled event and webhook row) whether it is
 * queued, running or suspended; one that ends first is untouched.
 */

const orm: Orm = await testOrm();
const sealer = new Sealer(randomBytes(32));
const QUICK = randomUUID();
const DELAY = randomUUID();
const SLOW = randomUUID();
const KEY = 'wr_deadline_key';

const seed = (slowUrl: string) =>
  seedBuyerCatalog(orm, sealer, KEY, [
    {
      id: QUICK,
      name: 'Quick',
      nodes: [
        { id: 'a', kind: 'text.template', template: 'hi' },
        { id: 'o', kind: 'output', from: 'a' },
      ],
    },
    {
      id: DELAY,
      name: 'Delay',
      nodes: [
        { id: 'a', kind: 'text.template', template: 'x' },
        { id: 'wait', kind: 'delay', seconds: 600, after: ['a'] },
        { id: 'o', kind: 'output', from: 'a', after: ['wait'] },
      ],
    },
    {
      id: SLOW,
      name: 'Slow',
      nodes: [
        { id: 'fetch', kind: 'http.request', method: 'GET', url: slowUrl },
        { id: 'o', kind: 'output', from: 'fetch' },
      ],
    },
  ]);

const row = async (id: string) =>
  (
    await orm.em
      .fork()
      .execute<{ status: string; phase: string | null; billing_status: string; charge_usd: string | null; deadline: Date | null }[]>(
        'select status, phase, billing_status, charge_usd, deadline from runs where id = ?',
        [id],
      )
  )[0]!;

/** The runs it cancelled by their deadline, and the one that completed first. */
async function scenario(deps: Deps, engineName: string): Promise<{ cancelled: string[]; finished: string }> {
  const principal = await authenticateKey(deps, `Bearer ${KEY}`);
  const start = async (workflow: string, cancelAfter?: string) =>
    (await startRun(deps, principal, { body: { workflow }, ...(cancelAfter ? { cancelAfterHeader: cancelAfter } : {}) })).run.id;
  const accountId = principal.accountId;

  // Suspended (a 10-minute delay) with a 4 s deadline; it holds the only slot, so the next run waits in the queue.
  const suspended = await start(DELAY, '4s');
  await waitFor(`${engineName}: the delay run suspended`, async () => (await row(suspended)).status === 'suspended', 20_000);
  const queued = await start(QUICK, '1s');
  const shown = await getRun(deps, accountId, queued);
  assert.ok(shown.deadline && Date.parse(shown.deadline) > Date.now() - 5_000, `the view shows the deadline: ${shown.deadline}`);
  await waitFor(`${engineName}: the queued run cancelled`, async () => (await row(queued)).status === 'cancelled', 20_000);
  await waitFor(`${engineName}: the suspended run cancelled`, async () => (await row(suspended)).status === 'cancelled', 20_000);

  // Running (its step waits on a server that never answers) with a 2 s deadline.
  const running = await start(SLOW, '2s');
  await waitFor(`${engineName}: the slow run running`, async () => (await row(running)).status === 'running', 20_000);
  await waitFor(`${engineName}: the running run cancelled`, async () => (await row(running)).status === 'cancelled', 20_000);

  // Ends before its deadline: untouched, charged as usual, its deadline still shown.
  const finished = await start(QUICK, '1h');
  await waitFor(`${engineName}: the quick run completed`, async () => (await row(finished)).status === 'completed', 20_000);

  for (const id of [queued, suspended, running]) {
    const r = await row(id);
    assert.is(r.billing_status, 'not_charged', `${engineName}: ${id} not charged`);
    assert.is(r.charge_usd, null);
    const events = await orm.em.fork().execute<{ type: string }[]>('select type from run_events where run_id = ? order by sequence', [id]);
    assert.is(events.at(-1)!.type, 'run.cancelled', `${engineName}: the last event of ${id}`);
    const hooks = await orm.em.fork().execute<{ event_type: string }[]>('select event_type from webhook_deliveries where run_id = ?', [id]);
    assert.equal(
      hooks.map((h) => h.event_type),
      ['run.cancelled'],
    );
  }
  const done = await row(finished);
  assert.is(done.billing_status, 'settled');
  assert.ok(done.deadline);
  assert.is((await getRun(deps, accountId, finished)).status, 'completed');
  return { cancelled: [queued, suspended, running], finished };
}

test('embedded engine: past its deadline a queued, a suspended and a running run are cancelled; one that ends first is not', async () => {
  const slow = await hangingServer();
  await seed(slow.url);
  try {
    await withEmbeddedEngine(engineDeps(orm, sealer, { RUN_CAPACITY: '1', ALLOW_PRIVATE_NETWORK: '1' }), (deps) => scenario(deps, 'embedded'));
  } finally {
    await slow.close();
  }
});

test('the embedded deadline survives a restart: a run past it while no engine ran is cancelled by the next one', async () => {
  const slow = await hangingServer();
  await seed(slow.url);
  const base = engineDeps(orm, sealer);
  const idle = new EmbeddedEngine(base);
  const principal = await authenticateKey(base, `Bearer ${KEY}`);
  const id = (await startRun({ ...base, engine: idle }, principal, { body: { workflow: QUICK }, cancelAfterHeader: '1s' })).run.id;
  await new Promise((r) => setTimeout(r, 1_500));
  assert.is((await row(id)).status, 'pending', 'no engine ran meanwhile');
  const engine = new EmbeddedEngine(base, { sweepIntervalMs: 200 });
  await engine.start();
  try {
    await waitFor('the overdue run cancelled after the restart', async () => (await row(id)).status === 'cancelled');
    assert.is((await row(id)).billing_status, 'not_charged');
  } finally {
    await engine.stop();
    await slow.close();
  }
});

const address = temporalAddress('run deadlines');
if (address) {
  test('Temporal engine: past its deadline a queued, a suspended and a running run are cancelled and their executions close Canceled; one that ends first is not', async () => {
    const slow = await hangingServer();
    await seed(slow.url);
    const h = await startLiveHarness(orm, address, { RUN_CAPACITY: '1', ALLOW_PRIVATE_NETWORK: '1' }, sealer);
    try {
      const { cancelled, finished } = await scenario(h.deps, 'temporal');
      for (const id of [...cancelled, finished]) await workflowClosed(h, id);
      const closedAs = async (id: string) => (await h.client.workflow.getHandle(id).describe()).status.name;
      for (const id of cancelled) assert.is(await closedAs(id), 'CANCELLED', `${id} closed as Canceled`);
      assert.is(await closedAs(finished), 'COMPLETED');
      // What an operator's query finds: every run cancelled by its deadline (visibility may lag a little).
      const query = `ExecutionStatus="Canceled" AND RunStatus="cancelled" AND WorkflowId IN (${[...cancelled, finished].map((id) => `"${id}"`).join(', ')})`;
      const found = await eventually('the cancelled executions listed', async () => {
        const ids: string[] = [];
        for await (const w of h.client.workflow.list({ query })) ids.push(w.workflowId);
        return ids.length === cancelled.length ? ids : null;
      });
      assert.equal(found.sort(), [...cancelled].sort());
    } finally {
      await h.close();
      await slow.close();
    }
  });
}

test.run();
