import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { REST_CATALOG } from '../helpers/app.ts';
import { resetDb, testOrm } from '../helpers/db.ts';
import { startGateServer } from '../helpers/gate-server.ts';
import { startService, type ServiceProcess } from '../helpers/service-process.ts';
import { W_TYPED } from '../rest/e2e/helpers/catalog.ts';

/**
 * Fairness across two real API processes (docs/design/flow-control.md#concurrency-keys): two `npm start`
 * processes (embedded engine) on one Postgres server database, RUN_CAPACITY=2. Key A queues 30 runs
 * through process 1; key B starts one run through process 2. Each run calls a local gate that holds it
 * in flight until the test releases it, one at a time, so the gate's arrivals are the order of admission.
 * B's run takes the pass after the queue's head (the clock), so at most one turn of A (the head and the
 * run of A that shares B's pass, accepted before it) is admitted between B's acceptance and B's run:
 * B is admitted before A's (RUN_CAPACITY + 3)rd run, whichever process runs the round.
 */

const KEY = 'wr_test_bob';
const CAPACITY = 2;
const A_RUNS = 30;

async function call(base: string, method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${base}/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${KEY}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

if (!process.env.DATABASE_URL) {
  // Said inside the suite's own output, where a reader of the run looks for it.
  test('two processes: fairness across them', () => console.log('  (SKIPPED: needs a Postgres server, DATABASE_URL; embedded PGlite serves one process)'));
} else {
  test('two processes: key B’s one run through process 2 is admitted within one turn of key A’s 30 queued through process 1', async () => {
    await resetDb(await testOrm());
    const gate = await startGateServer();
    const dirs = [mkdtempSync(join(tmpdir(), 'wr-fair-')), mkdtempSync(join(tmpdir(), 'wr-fair-'))];
    const shared = {
      DATABASE_URL: process.env.DATABASE_URL!,
      ENCRYPTION_KEY: randomBytes(32).toString('hex'),
      INTERNAL_API_TOKEN: 'fairness-processes-internal-token',
      RUN_CAPACITY: String(CAPACITY),
      ALLOW_PRIVATE_NETWORK: '1',
      ENGINE: 'embedded',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
    };
    const procs: ServiceProcess[] = [];
    try {
      // Process 1 loads the catalog; process 2 starts on the database as it is.
      procs.push(startService({ ...shared, CATALOG_FILE: REST_CATALOG, DATA_DIR: dirs[0]! }));
      const one = await procs[0]!.url;
      procs.push(startService({ ...shared, CATALOG_FILE: 'none', DATA_DIR: dirs[1]! }));
      const two = await procs[1]!.url;

      const items = Array.from({ length: A_RUNS }, (_, i) => ({ workflow: W_TYPED, inputs: { n: 1, site: gate.url(`a${i}`) }, concurrencyKey: 'customer-a' }));
      const batch = await call(one, 'POST', '/runs/batch', { runs: items });
      assert.is(batch.status, 202, JSON.stringify(batch.body));
      assert.is(batch.body.accepted, A_RUNS);
      // A's first two runs fill the capacity and wait at the gate; the rest of A is queued.
      assert.equal((await gate.arrived(CAPACITY)).sort(), ['a0', 'a1']);

      const b = await call(two, 'POST', '/runs', { workflow: W_TYPED, inputs: { n: 1, site: gate.url('b') }, concurrencyKey: 'customer-b' });
      assert.is(b.status, 202, JSON.stringify(b.body));
      const place = (await call(one, 'GET', `/runs/${b.body.run.id}`)).body.queue?.position;
      assert.ok(place !== undefined && place <= 3, `process 1 reads B's place behind at most one turn of A (${place})`);
      const lastOfA = (await call(two, 'GET', `/runs/${batch.body.items[A_RUNS - 1].run.id}`)).body.queue?.position;
      assert.is(lastOfA, A_RUNS - CAPACITY + 1, 'process 2 counts B ahead of A’s last run');

      // One slot at a time: release the oldest run in flight, wait for the next admitted one to arrive.
      for (let n = CAPACITY; !gate.arrivals.includes('b'); n++) {
        assert.ok(n < A_RUNS, `B never arrived: ${gate.arrivals.join(', ')}`);
        gate.release(gate.arrivals[n - CAPACITY]!);
        await gate.arrived(n + 1);
      }
      const beforeB = gate.arrivals.slice(CAPACITY, gate.arrivals.indexOf('b'));
      assert.ok(beforeB.length <= 2, `A's runs admitted between B's acceptance and B: ${beforeB.join(', ')} (at most the head and the run sharing B's pass)`);
      assert.ok(gate.arrivals.indexOf('b') < CAPACITY + 3, `B before A's ${CAPACITY + 3}th run: ${gate.arrivals.join(', ')}`);
      console.log(`  admission order: ${gate.arrivals.join(', ')}`);
    } finally {
      gate.openAll();
      await Promise.all(procs.map((p) => p.stop()));
      await gate.close();
      for (const d of dirs) rmSync(d, { recursive: true, force: true });
    }
  });
}

test.run();
