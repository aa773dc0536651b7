import { randomBytes, randomUUID } from 'node:crypto';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { Orm } from '../../src/db/orm.ts';
import { Sealer } from '../../src/security/crypto.ts';
import { authenticateKey } from '../../src/services/auth/authenticate-key.ts';
import type { Deps } from '../../src/runs/deps.ts';
import { startRun } from '../../src/runs/start-run.ts';
import { testOrm } from '../helpers/db.ts';
import { engineDeps, seedBuyerCatalog, withEmbeddedEngine } from '../helpers/engine-fixtures.ts';
import { startLiveHarness, workflowClosed } from '../helpers/live-temporal.ts';
import { temporalAddress } from '../helpers/temporal.ts';
import { waitFor } from '../helpers/wait-for.ts';

/**
 * Debounce on both engines (docs/design/flow-control.md#debounce): calls keep coming every 400 ms for
 * 7 s with delay 2 s and maxDelay 4 s. The burst's run starts at its maxDelay although calls keep coming,
 * with the inputs of the last call that joined it; the calls after it entered the queue make the next
 * burst's run. Each run starts once and is charged once; a joining call creates nothing.
 */

const orm: Orm = await testOrm();
const sealer = new Sealer(randomBytes(32));
const ECHO = randomUUID();
const KEY = 'wr_debounce_key';

const seed = () =>
  seedBuyerCatalog(orm, sealer, KEY, [
    {
      id: ECHO,
      name: 'Echo',
      nodes: [
        { id: 'msg', kind: 'input.text', name: 'Message', required: true },
        { id: 'o', kind: 'output', from: 'msg' },
      ],
    },
  ]);

type Row = { status: string; billing_status: string; started_ms: number | null; scheduled_ms: number | null; outputs: { value: unknown }[] };
const row = async (id: string) =>
  (
    await orm.em.fork().execute<Row[]>(
      `select status, billing_status, (extract(epoch from started_at) * 1000)::float8 as started_ms,
            (extract(epoch from scheduled_for) * 1000)::float8 as scheduled_ms, outputs from runs where id = ?`,
      [id],
    )
  )[0]!;
const startedCount = async (id: string) =>
  (await orm.em.fork().execute<{ n: number }[]>(`select count(*)::int as n from run_events where run_id = ? and type = 'run.started'`, [id]))[0]!.n;

async function scenario(deps: Deps, engineName: string): Promise<string[]> {
  const principal = await authenticateKey(deps, `Bearer ${KEY}`);
  const debounce = { key: 'doc', delay: '2s', maxDelay: '4s' };
  const t0 = Date.now();
  const calls: { msg: string; runId: string; debounced: boolean }[] = [];
  for (let i = 0; Date.now() < t0 + 7_000; i++) {
    const msg = `m${i}`;
    const r = await startRun(deps, principal, { body: { workflow: ECHO, inputs: { msg }, debounce } });
    calls.push({ msg, runId: r.run.id, debounced: r.debounced });
    await new Promise((resolve) => setTimeout(resolve, 400));
  }
  const runIds = [...new Set(calls.map((c) => c.runId))];
  assert.ok(runIds.length >= 2, `${engineName}: the calls after the first run entered the queue made another: ${runIds.length}`);
  assert.is(calls.filter((c) => !c.debounced).length, runIds.length, 'every run was made by one call; the others joined');
  for (const id of runIds) {
    await waitFor(`${engineName}: run ${id} completed`, async () => (await row(id)).status === 'completed', 30_000, 50);
    const r = await row(id);
    const last = calls.filter((c) => c.runId === id).at(-1)!;
    assert.equal(
      r.outputs.map((o) => o.value),
      [last.msg],
      `${engineName}: the run has the inputs of the last call that joined it`,
    );
    assert.is(r.billing_status, 'settled');
    assert.is(await startedCount(id), 1);
    assert.ok(r.started_ms! >= r.scheduled_ms!, 'not before its start');
  }
  // The first burst's calls came until t0 + 7 s; its run started at its maxDelay, not after the calls stopped.
  const first = await row(runIds[0]!);
  assert.ok(first.scheduled_ms! <= t0 + 4_000 + 500, `${engineName}: held at maxDelay: ${first.scheduled_ms! - t0} ms after the first call`);
  assert.ok(first.started_ms! < t0 + 7_000, `${engineName}: started while calls kept coming: ${first.started_ms! - t0} ms`);
  return runIds;
}

test('embedded engine: a debounced burst starts at its maxDelay while calls keep coming, with the last inputs', async () => {
  await seed();
  await withEmbeddedEngine(engineDeps(orm, sealer), (deps) => scenario(deps, 'embedded'));
});

const address = temporalAddress('debounce');
if (address) {
  test('Temporal engine: a debounced burst starts at its maxDelay while calls keep coming, with the last inputs', async () => {
    await seed();
    const h = await startLiveHarness(orm, address, {}, sealer);
    try {
      const runIds = await scenario(h.deps, 'temporal');
      for (const id of runIds) await workflowClosed(h, id);
    } finally {
      await h.close();
    }
  });
}

test.run();
