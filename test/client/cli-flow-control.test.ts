import { randomUUID } from 'node:crypto';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ApiError, WorkflowRunClient } from '../../src/client/src/index.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { ROOT, wr as runWr, type WrResult } from './helpers/wr-process.ts';

/**
 * `wr run --priority --concurrency-key` and `wr runs list --concurrency-key` as a real child process, and
 * the typed client's startRun with both, against the demo catalog (wr_demo_key may start high-priority
 * runs, wr_acme_key may not) on the embedded engine.
 */

const GREETING = '00000000-0000-4000-8000-00000000f001';
let t: TestApp;

test.before(async () => {
  t = await startTestApp({ catalog: `${ROOT}catalog/demo.yaml`, engine: 'app' });
});
test.after(async () => {
  await t?.close();
});

const wr = (args: string[]): Promise<WrResult> => runWr(args, { base: t.base });

test('wr run --priority high --concurrency-key K starts the run with both; wr runs list --concurrency-key K finds it', async () => {
  const customer = `customer-${randomUUID()}`;
  const r = await wr(['run', GREETING, '--input', 'name=Ada', '--input', 'tone=formal', '--priority', 'high', '--concurrency-key', customer, '--json']);
  assert.is(r.code, 0, r.stderr);
  const run = JSON.parse(r.stdout);
  const [row] = await t.deps.orm.em
    .fork()
    .execute<{ priority: number; concurrency_key: string; concurrency_limit: number }[]>(
      'select priority, concurrency_key, concurrency_limit from runs where id = ?',
      [run.id],
    );
  assert.equal({ ...row }, { priority: 0, concurrency_key: customer, concurrency_limit: 4 }, 'high, the key, and the catalog’s bound of wr_demo_key');
  const list = await wr(['runs', 'list', '--concurrency-key', customer, '--json']);
  assert.is(list.code, 0, list.stderr);
  assert.equal(
    JSON.parse(list.stdout).runs.map((x: { id: string }) => x.id),
    [run.id],
  );
  const wrong = await wr(['run', GREETING, '--input', 'name=Ada', '--input', 'tone=formal', '--priority', 'urgent']);
  assert.is(wrong.code, 2, 'an unknown priority is a usage error');
});

test('the typed client sends priority and concurrencyKey; high on a key the catalog does not allow it is ApiError forbidden', async () => {
  const demo = new WorkflowRunClient({ apiKey: 'wr_demo_key', baseUrl: t.base, userAgent: 'test' });
  const flow = { priority: 'low', concurrencyKey: 'tenant-7', maxConcurrentPerConcurrencyKey: 1 } as const;
  const started = await demo.startRun(GREETING, { inputs: { name: 'Bo', tone: 'formal' }, ...flow });
  const [row] = await t.deps.orm.em
    .fork()
    .execute<{ priority: number; concurrency_limit: number }[]>('select priority, concurrency_limit from runs where id = ?', [started.id]);
  assert.equal({ ...row }, { priority: 2, concurrency_limit: 1 });
  const acme = new WorkflowRunClient({ apiKey: 'wr_acme_key', baseUrl: t.base, userAgent: 'test' });
  const err = await acme.startRun(GREETING, { inputs: { name: 'Cy', tone: 'formal' }, priority: 'high' }).catch((e: unknown) => e);
  assert.instance(err, ApiError);
  assert.is((err as ApiError).code, 'forbidden');
});

test.run();
