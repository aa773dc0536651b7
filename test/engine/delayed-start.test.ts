import { randomBytes, randomUUID } from 'node:crypto';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { Orm } from '../../src/db/orm.ts';
import { ApiError } from '../../src/domain/errors.ts';
import { EmbeddedEngine } from '../../src/engine/embedded/embedded-engine.ts';
import { Sealer } from '../../src/security/crypto.ts';
import { authenticateKey } from '../../src/services/auth/authenticate-key.ts';
import type { Deps } from '../../src/runs/deps.ts';
import { cancelRun } from '../../src/runs/cancel-run.ts';
import { getRun } from '../../src/runs/get-run.ts';
import { rescheduleRun } from '../../src/runs/scheduled-runs.ts';
import { startRun } from '../../src/runs/start-run.ts';
import { testOrm } from '../helpers/db.ts';
import { startLiveHarness, workflowClosed } from '../helpers/live-temporal.ts';
import { temporalAddress } from '../helpers/temporal.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { hangingServer, engineDeps, seedBuyerCatalog, withEmbeddedEngine } from '../helpers/engine-fixtures.ts';

/**
 * Delayed starts on both engines (docs/design/flow-control.md): a scheduled run starts at its time and is
 * charged as any run; until then the queue does not count it; a reschedule into the past sends it into
 * the line; a reschedule racing the start either moves the start (the run keeps waiting) or is refused
 * `not_scheduled` (the run started), never both; a start that came while no engine ran is taken by the
 * next one.
 */

const orm: Orm = await testOrm();
const sealer = new Sealer(randomBytes(32));
const QUICK = randomUUID();
const SLOW = randomUUID();
const KEY = 'wr_delayed_key';

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
      id: SLOW,
      name: 'Slow',
      nodes: [
        { id: 'fetch', kind: 'http.request', method: 'GET', url: slowUrl },
        { id: 'o', kind: 'output', from: 'fetch' },
      ],
    },
  ]);

/** The run's state, its instants as epoch ms (null: none). */
type Row = { status: string; phase: string | null; billing_status: string; scheduled_for: number | null; started_at: number | null; queued_at: number };
const ms = (column: string) => `(extract(epoch from ${column}) * 1000)::float8 as ${column}`;
const row = async (id: string) =>
  (
    await orm.em
      .fork()
      .execute<Row[]>(`select status, phase, billing_status, ${ms('scheduled_for')}, ${ms('started_at')}, ${ms('queued_at')} from runs where id = ?`, [id])
  )[0]!;
const eventTypes = async (id: string) =>
  (await orm.em.fork().execute<{ type: string }[]>('select type from run_events where run_id = ? order by sequence', [id])).map((e) => e.type);
const iso = (ms: number) => new Date(ms).toISOString();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));

async function scenario(deps: Deps, engineName: string): Promise<string[]> {
  const principal = await authenticateKey(deps, `Bearer ${KEY}`);
  const accountId = principal.accountId;
  const start = async (workflow: string, more: { startAfterHeader?: string; startAt?: string } = {}) =>
    (await startRun(deps, principal, { body: { workflow, ...(more.startAt ? { startAt: more.startAt } : {}) }, startAfterHeader: more.startAfterHeader })).run
      .id;
  const completed = (id: string) => waitFor(`${engineName}: ${id} completed`, async () => (await row(id)).status === 'completed', 30_000, 50);

  // Starts at its time, not before, and is charged as any run.
  const later = await start(QUICK, { startAfterHeader: '2s' });
  assert.is((await row(later)).phase, 'scheduled');
  await sleep(1_000);
  assert.is((await row(later)).phase, 'scheduled', `${engineName}: not started before its time`);
  await completed(later);
  const done = await row(later);
  assert.ok(done.started_at! >= done.scheduled_for!, `${engineName}: started ${done.started_at} ≥ ${done.scheduled_for}`);
  assert.ok(done.queued_at >= done.scheduled_for!, 'queued_at is when it entered the line');
  assert.is(done.billing_status, 'settled');
  const types = await eventTypes(later);
  assert.is(types[0], 'run.queued');
  assert.is(types.filter((t) => t === 'run.started').length, 1);

  // Outside the line until its start: the queued run behind a busy slot is first; a reschedule into the past puts it second.
  const slow = await start(SLOW);
  await waitFor(`${engineName}: the slow run running`, async () => (await row(slow)).status === 'running', 20_000);
  const scheduled = await start(QUICK, { startAfterHeader: '1h' });
  const queued = await start(QUICK);
  assert.is((await getRun(deps, accountId, queued)).queue?.position, 1, `${engineName}: the scheduled run is not counted`);
  assert.is((await getRun(deps, accountId, scheduled)).queue, null);
  await rescheduleRun(deps, accountId, scheduled, { startAt: iso(Date.now() - 1_000) });
  await waitFor(`${engineName}: the rescheduled run in line`, async () => (await getRun(deps, accountId, scheduled)).queue?.position === 2, 10_000, 50);
  await cancelRun(deps, accountId, slow);
  await completed(queued);
  await completed(scheduled);

  // A reschedule racing the start: each run either keeps waiting with its new start or started; never both.
  const due = Date.now() + 2_000;
  const racing = await Promise.all(Array.from({ length: 10 }, () => start(QUICK, { startAt: iso(due) })));
  const outcomes = await Promise.all(
    racing.map(async (id, i) => {
      await sleep(due + (i - 5) * 60 - Date.now());
      try {
        await rescheduleRun(deps, accountId, id, { startAt: iso(Date.now() + 3_600_000) });
        return 'moved';
      } catch (err) {
        if (err instanceof ApiError && err.code === 'not_scheduled') return 'started';
        throw err;
      }
    }),
  );
  const started = racing.filter((_, i) => outcomes[i] === 'started');
  for (const id of started) await completed(id);
  await sleep(1_500);
  for (const [i, id] of racing.entries()) {
    if (outcomes[i] !== 'moved') continue;
    const r = await row(id);
    assert.equal([r.status, r.phase, r.started_at], ['pending', 'scheduled', null], `${engineName}: a moved run did not start`);
    assert.ok(r.scheduled_for! > Date.now() + 3_000_000);
  }
  for (const id of started) assert.is((await eventTypes(id)).filter((t) => t === 'run.started').length, 1);
  return [later, queued, scheduled, ...started];
}

const base = (env: Record<string, string> = {}) => engineDeps(orm, sealer, { ALLOW_PRIVATE_NETWORK: '1', ...env });

test('embedded engine: a delayed run starts at its time, outside the line until then; reschedule moves it, racing the start safely', async () => {
  const slow = await hangingServer();
  await seed(slow.url);
  try {
    await withEmbeddedEngine(base({ RUN_CAPACITY: '1' }), (deps) => scenario(deps, 'embedded'));
  } finally {
    await slow.close();
  }
});

test('embedded engine: a start that came while no engine ran is taken by the next one, once', async () => {
  const slow = await hangingServer();
  await seed(slow.url);
  const b = base();
  const idle = new EmbeddedEngine(b);
  const principal = await authenticateKey(b, `Bearer ${KEY}`);
  const id = (await startRun({ ...b, engine: idle }, principal, { body: { workflow: QUICK }, startAfterHeader: '1s' })).run.id;
  await sleep(1_500);
  assert.is((await row(id)).phase, 'scheduled', 'no engine ran meanwhile');
  const engine = new EmbeddedEngine(b, { sweepIntervalMs: 200 });
  await engine.start();
  try {
    await waitFor('the scheduled run completed after the restart', async () => (await row(id)).status === 'completed', 20_000);
    assert.is((await eventTypes(id)).filter((t) => t === 'run.started').length, 1);
  } finally {
    await engine.stop();
    await slow.close();
  }
});

const address = temporalAddress('delayed starts');
if (address) {
  test('Temporal engine: a delayed run starts at its time, outside the line until then; reschedule moves it, racing the start safely', async () => {
    const slow = await hangingServer();
    await seed(slow.url);
    const h = await startLiveHarness(orm, address, { RUN_CAPACITY: '1', ALLOW_PRIVATE_NETWORK: '1' }, sealer);
    try {
      const ran = await scenario(h.deps, 'temporal');
      for (const id of ran) await workflowClosed(h, id);
    } finally {
      await h.close();
      await slow.close();
    }
  });

  test('Temporal engine: a scheduled run has no workflow before its start; one due while no engine ran starts with the next, once', async () => {
    const slow = await hangingServer();
    await seed(slow.url);
    const first = await startLiveHarness(orm, address, {}, sealer);
    const principal = await authenticateKey(first.deps, `Bearer ${KEY}`);
    const id = (await startRun(first.deps, principal, { body: { workflow: QUICK }, startAfterHeader: '2s' })).run.id;
    await sleep(500);
    await first.client.workflow
      .getHandle(id)
      .describe()
      .then(
        () => assert.unreachable('a workflow was started before the run was due'),
        (err: Error) => assert.is(err.name, 'WorkflowNotFoundError'),
      );
    await first.close();
    await sleep(2_500);
    assert.is((await row(id)).phase, 'scheduled', 'no engine ran meanwhile');
    const second = await startLiveHarness(orm, address, {}, sealer);
    try {
      await waitFor('the scheduled run completed after the restart', async () => (await row(id)).status === 'completed', 30_000);
      await workflowClosed(second, id);
      assert.is((await eventTypes(id)).filter((t) => t === 'run.started').length, 1);
    } finally {
      await second.close();
      await slow.close();
    }
  });
}

test.run();
