import { randomBytes, randomUUID } from 'node:crypto';
import pg from 'pg';
import pino from 'pino';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { parseCatalog } from '../../src/catalog/parse-catalog.ts';
import { loadCatalog } from '../../src/catalog/load-catalog.ts';
import { loadConfig } from '../../src/config/config.ts';
import { NullEngine } from '../../src/runs/engine-port.ts';
import { Sealer } from '../../src/security/crypto.ts';
import { authenticateKey } from '../../src/services/auth/authenticate-key.ts';
import { InProcessRunEventBus } from '../../src/services/events/bus.ts';
import { PostgresRunEventBus } from '../../src/services/events/pg-bus.ts';
import { startRun } from '../../src/runs/start-run.ts';
import { resetDb, testOrm } from '../helpers/db.ts';
import { messagesWhile } from '../helpers/round-trips.ts';

/**
 * The LISTEN/NOTIFY run event bus against the Postgres server (DATABASE_URL): two bus instances stand
 * for the API process (tailing) and the worker process (writing). Skipped, with a printed reason,
 * without DATABASE_URL: embedded PGlite has one connection, so there is nothing to cross.
 */

const url = process.env.DATABASE_URL;
const buses: PostgresRunEventBus[] = [];
const bus = (opts: { notifyGapMs?: number } = {}) => {
  const b = new PostgresRunEventBus({ connectionString: url!, reconnectDelayMs: 50, ...opts });
  buses.push(b);
  return b;
};

async function until(what: string, probe: () => boolean | Promise<boolean>, ms = 5_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await probe())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

test.after.each(async () => {
  for (const b of buses.splice(0)) await b.close();
});

if (!url) {
  console.log('  pg-bus: skipped — DATABASE_URL not set (LISTEN/NOTIFY needs a Postgres server)');
} else {
  test('an event published by one process reaches a live tail in another process', async () => {
    const worker = bus();
    const api = bus();
    const runId = randomUUID();
    const seen: number[] = [];
    api.subscribe(runId, (seq) => seen.push(seq));
    await api.connect();
    await worker.connect();
    worker.publish(runId, 5);
    await until('the notification', () => seen.includes(5));
    assert.equal(seen, [5]);
  });

  test('a subscriber in the publishing process hears the event once (its own NOTIFY is ignored)', async () => {
    const b = bus();
    const runId = randomUUID();
    const seen: number[] = [];
    b.subscribe(runId, (seq) => seen.push(seq));
    await b.connect();
    b.publish(runId, 3);
    await b.drain();
    await new Promise((r) => setTimeout(r, 150));
    assert.equal(seen, [3]);
  });

  test('publishes of one tick are sent as one batch with the newest sequence per run', async () => {
    const worker = bus();
    const api = bus();
    const r1 = randomUUID();
    const r2 = randomUUID();
    const s1: number[] = [];
    const s2: number[] = [];
    api.subscribe(r1, (s) => s1.push(s));
    api.subscribe(r2, (s) => s2.push(s));
    await Promise.all([api.connect(), worker.connect()]);
    worker.publish(r1, 1);
    worker.publish(r1, 2);
    worker.publish(r2, 7);
    worker.publish(r1, 4);
    await until('both runs', () => s1.includes(4) && s2.includes(7));
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(s1, [4]);
    assert.equal(s2, [7]);
  });

  test('publishes within the gap after a NOTIFY are sent together once the gap is over', async () => {
    const worker = bus({ notifyGapMs: 300 });
    const api = bus();
    const runId = randomUUID();
    const seen: [number, number][] = [];
    api.subscribe(runId, (seq) => seen.push([seq, performance.now()]));
    await Promise.all([api.connect(), worker.connect()]);
    const first = performance.now();
    worker.publish(runId, 1); // a quiet bus: sent at once
    await until('the first notification', () => seen.length === 1);
    assert.ok(seen[0]![1] - first < 250, 'the first publish is not held back');
    worker.publish(runId, 2);
    await new Promise((r) => setTimeout(r, 20)); // another tick, still within the gap
    worker.publish(runId, 3);
    await until('the second notification', () => seen.length >= 2);
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(
      seen.map(([s]) => s),
      [1, 3],
      'the two publishes of the gap travel as one notification, with the newest sequence',
    );
    assert.ok(seen[1]![1] - first >= 280, 'the second notification waits for the gap');
  });

  test('a quiet bus lets a transaction carry its notification: the gap starts, and what that transaction notified is not sent again', async () => {
    const worker = bus({ notifyGapMs: 200 });
    const runId = randomUUID();
    const local: number[] = [];
    worker.subscribe(runId, (seq) => local.push(seq));
    await worker.connect();
    assert.is(worker.claimNotify(), 'run_events', 'quiet: the transaction may notify');
    assert.is(worker.claimNotify(), null, 'within the gap that claim started');
    // The transaction notifies sequence 4 and commits (told before its echo can come back); the process then publishes it.
    worker.notifiedBy(new Map([[runId, 4]]));
    const tx = new pg.Client({ connectionString: url });
    await tx.connect();
    await tx.query(`select pg_notify('run_events', $1)`, [`${runId}:4`]);
    await tx.end();
    const { messages } = await messagesWhile(async () => {
      worker.publish(runId, 4);
      await new Promise((r) => setTimeout(r, 300));
      await worker.drain();
    });
    assert.equal(
      messages.filter((m) => m === 'notify_each'),
      [],
      'the bus sends nothing for it',
    );
    assert.equal(local, [4], 'local subscribers hear it once: the echo of the transaction’s NOTIFY is not told again');
    // A newer sequence is the bus's to send; something pending means no claim.
    worker.publish(runId, 5);
    assert.is(worker.claimNotify(), null, 'a publish is waiting');
    const sent = await messagesWhile(() => worker.drain());
    assert.ok(sent.messages.includes('notify_each'));
  });

  test('drain sends what is held back by the gap at once', async () => {
    const worker = bus({ notifyGapMs: 10_000 });
    const api = bus();
    const runId = randomUUID();
    const seen: number[] = [];
    api.subscribe(runId, (seq) => seen.push(seq));
    await Promise.all([api.connect(), worker.connect()]);
    worker.publish(runId, 1);
    await until('the first notification', () => seen.length === 1);
    worker.publish(runId, 2);
    await worker.drain();
    await until('the drained notification', () => seen.includes(2), 2_000);
  });

  test('after its connection is killed the bus reconnects, listens again and tells tails where the log is', async () => {
    const orm = await testOrm();
    await resetDb(orm);
    const workflowId = randomUUID();
    await loadCatalog(
      orm,
      parseCatalog(
        JSON.stringify({
          pricing: { stepUsd: '0.000100' },
          accounts: [{ handle: 'alice', walletUsd: '1.000000', apiKeys: [{ secret: 'wr_alice_key', scopes: ['run:execute'] }] }],
          workflows: [
            {
              id: workflowId,
              owner: 'alice',
              name: 'Bus',
              runModel: 'free',
              versions: [
                {
                  id: randomUUID(),
                  label: 'v1',
                  graph: {
                    nodes: [
                      { id: 't', kind: 'text.template', template: 'x' },
                      { id: 'o', kind: 'output', from: 't' },
                    ],
                  },
                },
              ],
            },
          ],
        }),
        'test',
      ),
      { sealer: new Sealer(randomBytes(32)) },
    );
    const deps = {
      config: loadConfig({ CATALOG_FILE: 'none', LOG_LEVEL: 'silent' }),
      orm,
      log: pino({ level: 'silent' }),
      sealer: new Sealer(randomBytes(32)),
      bus: new InProcessRunEventBus(),
      baseUrl: () => 'http://localhost:8080/v1',
      engine: new NullEngine(),
    };
    const { run } = await startRun(deps, await authenticateKey(deps, 'Bearer wr_alice_key'), { body: { workflow: workflowId, inputs: {} } });

    const worker = bus();
    const api = bus();
    const seen: number[] = [];
    api.subscribe(run.id, (s) => seen.push(s));
    await Promise.all([api.connect(), worker.connect()]);
    const pid = api.backendPid;
    assert.ok(pid, 'the listening connection has a backend pid');
    await orm.em.fork().execute('select pg_terminate_backend(?)', [pid]);
    // While the tail's process is not listening the worker's log grows (its NOTIFY is lost for it).
    await orm.em.fork().execute('update runs set last_sequence = 9 where id = ?', [run.id]);
    await until('the reconnect', () => api.connections >= 2 && api.listening);
    // The resync after the reconnect tells the tail the run's current last_sequence: nothing stays unseen.
    await until('the resync', () => seen.includes(9));
    // Listening again: the next publish arrives.
    worker.publish(run.id, 10);
    await until('a notification after the reconnect', () => seen.includes(10));
  });
}

test.run();
