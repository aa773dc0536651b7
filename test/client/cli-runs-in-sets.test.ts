import { randomUUID } from 'node:crypto';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { WorkflowRunClient } from '../../src/client/src/index.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { ROOT, wr as runWr, type WrResult } from './helpers/wr-process.ts';

/**
 * `wr runs cancel` by filter and `wr runs replay` as a real child process against the service with the
 * demo catalog and the embedded engine, and the typed client's cancelRuns / replayRun / replayRuns.
 */

const PARSE_LATER = '00000000-0000-4000-8000-00000000f004';
const FETCH_PAGE = '00000000-0000-4000-8000-00000000f005';
let t: TestApp;
let client: WorkflowRunClient;

test.before(async () => {
  t = await startTestApp({ catalog: `${ROOT}catalog/demo.yaml`, engine: 'app' });
  client = new WorkflowRunClient({ apiKey: 'wr_demo_key', baseUrl: t.base, userAgent: 'test' });
});
test.after(async () => {
  await t?.close();
});

const wr = (args: string[]): Promise<WrResult> => runWr(args, { base: t.base });

test('wr runs cancel --metadata k=v --dry-run counts; without --dry-run cancels suspended runs of the filter', async () => {
  const batch = randomUUID();
  const ids = [];
  for (let i = 0; i < 2; i++) ids.push((await client.startRun(PARSE_LATER, { metadata: { batch } })).id);
  for (const id of ids) await waitFor(`${id} suspended on its 5 s delay`, async () => (await client.getRun(id)).status === 'suspended');
  const dry = await wr(['runs', 'cancel', '--status', 'running', '--metadata', `batch=${batch}`, '--dry-run']);
  assert.equal([dry.code, dry.stdout.trim()], [0, '2 runs matched: would cancel 2, 0 already ended']);
  assert.is((await client.getRun(ids[0]!)).status, 'suspended');
  const done = await wr(['runs', 'cancel', '--metadata', `batch=${batch}`]);
  assert.equal([done.code, done.stdout.trim()], [0, '2 runs matched: cancelled 2, 0 already ended']);
  for (const id of ids) assert.is((await client.getRun(id)).status, 'cancelled');
  const none = await wr(['runs', 'cancel']);
  assert.is(none.code, 2, 'no id and no filter is a usage error');
});

test('wr runs replay ID: a password input must be given again; then a new run replays the run', async () => {
  const original = (await client.startRun(FETCH_PAGE, { inputs: { url: 'http://127.0.0.1:9/', token: 'first' } })).id;
  await waitFor('the original ended', async () => ['completed', 'failed', 'cancelled'].includes((await client.getRun(original)).status));
  const refused = await wr(['runs', 'replay', original]);
  assert.is(refused.code, 1);
  assert.match(refused.stderr, /token/);
  const replayed = await wr(['runs', 'replay', original, '-i', 'token=second', '--json']);
  assert.is(replayed.code, 0, replayed.stderr);
  const started = JSON.parse(replayed.stdout);
  assert.is((await client.getRun(started.id)).replayOf, original);

  const set = await client.replayRuns({ ids: [original, randomUUID()], inputs: { token: 'third' } });
  assert.equal([set.accepted, set.refused], [1, 1]);
  const cancelled = await client.cancelRuns({ ids: [started.id] }, { dryRun: true });
  assert.is(cancelled.dryRun, true);
});

test.run();
