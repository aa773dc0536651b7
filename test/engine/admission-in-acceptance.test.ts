import { randomBytes, randomUUID } from 'node:crypto';
import pg from 'pg';
import pino from 'pino';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { parseCatalog } from '../../src/catalog/parse-catalog.ts';
import { loadCatalog } from '../../src/catalog/load-catalog.ts';
import { loadConfig } from '../../src/config/config.ts';
import { query } from '../../src/db/statement.ts';
import { EmbeddedEngine } from '../../src/engine/embedded/embedded-engine.ts';
import { ADMIT_QUEUED_IF_LOCKED, admitValues, TRY_LOCK_ADMISSION_FOR_ACCEPTANCES } from '../../src/sql/admit-queued.ts';
import { admissionInAcceptance } from '../../src/engine/embedded/admission-in-acceptance.ts';
import type { AdmissionPump } from '../../src/engine/embedded/admission-pump.ts';
import type { RunsDeps } from '../../src/runs/deps.ts';
import { Sealer } from '../../src/security/crypto.ts';
import { authenticateKey } from '../../src/services/auth/authenticate-key.ts';
import type { Deps } from '../../src/services/deps.ts';
import { InProcessRunEventBus } from '../../src/services/events/bus.ts';
import { startRun } from '../../src/services/runs/start-run.ts';
import { openOrm, type Orm } from '../../src/db/orm.ts';
import { resetDb, testDbOptions, testOrm } from '../helpers/db.ts';
import { statementsWhile } from '../helpers/statement-log.ts';
import { waitFor } from '../helpers/wait-for.ts';

/**
 * The embedded engine's admission round carried by POST /runs acceptances on a Postgres server
 * (src/engine/embedded/admission-in-acceptance.ts): in the acceptances' own transaction, never waiting
 * for the admission lock or for a queued run's row. Embedded PGlite commits each acceptance alone, and
 * the engine's own rounds admit the run, as the other engine suites show.
 */

const url = process.env.DATABASE_URL;
const orm = await testOrm();
const sealer = new Sealer(randomBytes(32));
const engines: EmbeddedEngine[] = [];
const db = () => orm.em.fork();

/** alice (at most `aliceMax` runs in flight) and bob, and one free workflow by alice: a template, after a `delaySeconds` delay if given. */
async function seed(o: { aliceMax?: number; delaySeconds?: number } = {}): Promise<string> {
  await resetDb(orm);
  const template = { id: 't', kind: 'text.template', template: 'x', ...(o.delaySeconds ? { after: ['d'] } : {}) };
  const nodes = [...(o.delaySeconds ? [{ id: 'd', kind: 'delay', seconds: o.delaySeconds }] : []), template, { id: 'o', kind: 'output', from: 't' }];
  const workflowId = randomUUID();
  const catalog = {
    pricing: { stepUsd: '0.000100' },
    accounts: [
      { handle: 'alice', walletUsd: '10.000000', maxConcurrentRuns: o.aliceMax ?? null, apiKeys: [{ secret: 'wr_alice_key', scopes: ['run:execute', 'run:read'] }] },
      { handle: 'bob', walletUsd: '10.000000', apiKeys: [{ secret: 'wr_bob_key', scopes: ['run:execute', 'run:read'] }] },
    ],
    workflows: [
      {
        id: workflowId,
        owner: 'alice',
        name: 'Admission in acceptance',
        runModel: 'free',
        versions: [{ id: randomUUID(), label: 'v1', graph: { nodes } }],
      },
    ],
  };
  await loadCatalog(orm, parseCatalog(JSON.stringify(catalog), 'test'), { sealer });
  return workflowId;
}

function app(on: Orm = orm): Deps {
  const base = {
    config: loadConfig({ CATALOG_FILE: 'none', LOG_LEVEL: 'silent' }),
    orm: on,
    log: pino({ level: 'silent' }),
    sealer,
    bus: new InProcessRunEventBus(),
    baseUrl: () => 'http://localhost:8080/v1',
  };
  // No sweep during a test: only the rounds under test admit anything.
  const engine = new EmbeddedEngine(base, { leaseTtlMs: 2_000, sweepIntervalMs: 600_000, stopTimeoutMs: 2_000 });
  engines.push(engine);
  return { ...base, engine };
}

async function accept(deps: Deps, workflowId: string, key = 'wr_alice_key'): Promise<string> {
  const principal = await authenticateKey(deps, `Bearer ${key}`);
  return (await startRun(deps, principal, { body: { workflow: workflowId, inputs: {} } })).run.id;
}

const status = async (id: string) => (await db().execute<{ status: string; phase: string | null }[]>('select status, phase from runs where id = ?', [id]))[0]!;

test.after.each(async () => {
  for (const e of engines.splice(0)) await e.stop().catch(() => undefined);
});

test('runs admitted by a group that cannot be started are let go at once, not left leased until their leases run out', async () => {
  const failures: unknown[] = [];
  let unstarted: string[] = [];
  const tail = admissionInAcceptance({
    // Starting needs the database; this one is gone.
    deps: {
      orm: {
        get em(): never {
          throw new Error('the database is gone');
        },
      },
    } as unknown as RunsDeps,
    args: { capacity: 8, engine: 'embedded', window: 100, lease: { owner: 'me', ttlMs: 15_000 } },
    pump: { roundElsewhere: () => 0, roundElsewhereDone: () => undefined } as unknown as AdmissionPump,
    running: () => true,
    admitted: () => assert.unreachable('nothing could be started'),
    failed: (err) => failures.push(err),
    unstarted: (ids) => (unstarted = ids),
  });
  const carried = tail.next([[]])!;
  const covered = carried.done({
    head: [{ rows: [{}] }],
    group: [{ rows: [{ admitted_id: 'run-a' }] }, { rows: [{ admitted_id: null }] }],
    tail: [{ rows: [{ id: 'run-b', locked: true, looked_at: 1, picked_count: 1 }] }],
  });
  assert.is(covered, true);
  await waitFor('the start to fail', async () => failures.length > 0, 2_000);
  assert.equal(unstarted, ['run-a', 'run-b']);
});

if (!url) {
  console.log('  admission in acceptance: skipped — DATABASE_URL not set (embedded PGlite commits each acceptance alone)');
} else {
  test('a run accepted alone is admitted by the round its acceptance carries: the engine runs no round of its own', async () => {
    const workflowId = await seed();
    const deps = app();
    await deps.engine.start();
    await new Promise((r) => setTimeout(r, 100)); // the start's own round
    let id = '';
    const { sql } = await statementsWhile(orm, async () => {
      id = await accept(deps, workflowId);
      await waitFor('the run to complete', async () => (await status(id)).status === 'completed', 5_000);
    });
    assert.is(sql.filter((q) => q.includes('pg_try_advisory_xact_lock(727001)')).length, 1, 'one round, carried by the acceptance');
    assert.is(sql.filter((q) => q.includes('pg_advisory_xact_lock(727001)')).length, 0, 'no round of the engine’s own');
  });

  /** Records each run's row as it was inserted (phase, lease) while `fn` runs. */
  async function asInserted(fn: () => Promise<void>): Promise<Map<string, { phase: string; leased: boolean }>> {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    try {
      await c.query(`create table if not exists test_inserted_runs (id uuid, phase text, leased boolean);
        truncate test_inserted_runs;
        create or replace function test_record_inserted_run() returns trigger language plpgsql as $$
          begin insert into test_inserted_runs values (new.id, new.phase, new.lease_owner is not null and new.lease_until > now()); return null; end $$;
        create trigger test_record_inserted_run after insert on runs for each row execute function test_record_inserted_run();`);
      try {
        await fn();
      } finally {
        await c.query('drop trigger test_record_inserted_run on runs');
      }
      const { rows } = await c.query<{ id: string; phase: string; leased: boolean }>('select id::text, phase, leased from test_inserted_runs');
      return new Map(rows.map((r) => [r.id, { phase: r.phase, leased: r.leased }]));
    } finally {
      await c.end();
    }
  }

  test('a run accepted while nothing waits in the queue and there is room is inserted admitted, with the engine’s lease, and runs', async () => {
    const workflowId = await seed();
    const deps = app();
    await deps.engine.start();
    await new Promise((r) => setTimeout(r, 100));
    let id = '';
    const inserted = await asInserted(async () => {
      id = await accept(deps, workflowId);
    });
    assert.equal(inserted.get(id), { phase: 'starting', leased: true });
    await waitFor('the run to complete', async () => (await status(id)).status === 'completed', 5_000);
  });

  test('a run accepted while another waits in the queue is inserted queued behind it, and one over its account’s limit is inserted queued', async () => {
    const workflowId = await seed({ aliceMax: 1, delaySeconds: 0.5 });
    const deps = app();
    await deps.engine.start();
    await new Promise((r) => setTimeout(r, 100));
    const ids: string[] = [];
    const inserted = await asInserted(async () => {
      ids.push(await accept(deps, workflowId)); // admitted: alice has none in flight
      ids.push(await accept(deps, workflowId)); // alice's limit: queued
      ids.push(await accept(deps, workflowId, 'wr_bob_key')); // room for bob, but alice's second waits in the queue
    });
    assert.equal(
      ids.map((id) => inserted.get(id)),
      [
        { phase: 'starting', leased: true },
        { phase: 'queued', leased: false },
        { phase: 'queued', leased: false },
      ],
    );
    for (const id of ids) await waitFor('every run to complete', async () => (await status(id)).status === 'completed', 10_000);
  });

  test('while another transaction holds the admission lock the acceptance does not wait for it, and the engine admits the run once it is free', async () => {
    const workflowId = await seed();
    const deps = app();
    await deps.engine.start();
    await new Promise((r) => setTimeout(r, 100));
    const holder = new pg.Client({ connectionString: url });
    await holder.connect();
    try {
      await holder.query('begin');
      await holder.query('select pg_advisory_xact_lock(727001)');
      const t0 = Date.now();
      const id = await accept(deps, workflowId);
      assert.ok(Date.now() - t0 < 1_000, 'accepted without waiting for the lock');
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(await status(id), { status: 'pending', phase: 'queued' }, 'not admitted while the lock is held elsewhere');
      await holder.query('commit');
      await waitFor('the run to complete after the lock is free', async () => (await status(id)).status === 'completed', 5_000);
    } finally {
      await holder.query('rollback').catch(() => undefined);
      await holder.end();
    }
  });

  test('while the queue is known clean a group goes without the round after its acceptances, and a run it queues behind another process’s is still admitted', async () => {
    const workflowId = await seed();
    const deps = app();
    await deps.engine.start();
    await new Promise((r) => setTimeout(r, 100)); // the start's own round finds the queue clean
    const isRound = (q: string) => q.includes('skip locked');
    const alone = await statementsWhile(orm, async () => {
      const id = await accept(deps, workflowId);
      await waitFor('the run to complete', async () => (await status(id)).status === 'completed', 5_000);
    });
    assert.is(alone.sql.filter((q) => q.includes('pg_try_advisory_xact_lock(727001)')).length, 1, 'the group took the admission lock');
    assert.is(alone.sql.filter(isRound).length, 0, 'and carried no round');

    // Another process, with no engine running, queues a run: this process does not know of it.
    const elsewhere = await openOrm(testDbOptions());
    try {
      const theirs = await accept(app(elsewhere), workflowId);
      assert.equal(await status(theirs), { status: 'pending', phase: 'queued' });
      let ours = '';
      const inserted = await asInserted(async () => {
        ours = await accept(deps, workflowId);
      });
      assert.equal(inserted.get(ours), { phase: 'queued', leased: false }, 'queued behind the other process’s run');
      for (const id of [theirs, ours]) await waitFor('both runs to complete', async () => (await status(id)).status === 'completed', 5_000);
    } finally {
      await elsewhere.close(true);
    }
  });

  test('the carried round skips a queued run whose row another transaction holds, and says one is still waiting', async () => {
    const workflowId = await seed();
    const deps = app(); // not started: the runs stay queued
    const held = await accept(deps, workflowId);
    const free = await accept(deps, workflowId);
    const holder = new pg.Client({ connectionString: url });
    await holder.connect();
    try {
      await holder.query('begin');
      await holder.query('select 1 from runs where id = $1 for update', [held]);
      const out = await db().transactional(async (tx) => {
        await query(tx, TRY_LOCK_ADMISSION_FOR_ACCEPTANCES, [8, 'embedded', null, null]);
        return query<{ id: string | null; looked_at: number; picked_count: number; locked: boolean }>(
          tx,
          ADMIT_QUEUED_IF_LOCKED,
          admitValues({ capacity: 8, engine: 'embedded', window: 100 }),
        );
      });
      assert.equal(out.map((r) => r.id), [free], 'only the run whose row is free is admitted');
      assert.is(out[0]!.locked, true);
      assert.ok(Number(out[0]!.looked_at) > Number(out[0]!.picked_count), 'a run is still waiting');
    } finally {
      await holder.query('rollback');
      await holder.end();
    }
    assert.equal(await status(held), { status: 'pending', phase: 'queued' });
  });

  test('without the admission lock the carried round admits nothing and says so', async () => {
    const workflowId = await seed();
    const deps = app();
    const id = await accept(deps, workflowId);
    const holder = new pg.Client({ connectionString: url });
    await holder.connect();
    try {
      await holder.query('select pg_advisory_lock(727001)');
      const out = await db().transactional(async (tx) => {
        await query(tx, TRY_LOCK_ADMISSION_FOR_ACCEPTANCES, [8, 'embedded', null, null]);
        return query<{ id: string | null; locked: boolean }>(tx, ADMIT_QUEUED_IF_LOCKED, admitValues({ capacity: 8, engine: 'embedded', window: 100 }));
      });
      assert.equal(out.map((r) => [r.id, r.locked]), [[null, false]]);
    } finally {
      await holder.end();
    }
    assert.equal(await status(id), { status: 'pending', phase: 'queued' });
  });
}

test.run();
