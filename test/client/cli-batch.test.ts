import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { WorkflowRunClient, type StartRunsItem } from '../../src/client/src/index.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { lines, ROOT, wr } from './helpers/wr-process.ts';

/** `wr batch FILE.jsonl` as a real child process, and the client's `startRuns`, against the service with the demo catalog. */

const GREETING = '00000000-0000-4000-8000-00000000f001';
let t: TestApp;

test.before(async () => {
  t = await startTestApp({ catalog: `${ROOT}catalog/demo.yaml` });
});
test.after(async () => {
  await t?.close();
});

const jsonl = (name: string, rows: unknown[]) => {
  mkdirSync(join(ROOT, '.tmp'), { recursive: true });
  const file = join(ROOT, '.tmp', `${name}-${process.pid}.jsonl`);
  writeFileSync(file, rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
  return file;
};

test('wr batch: a progress bar, one result line per run in file order, exit code 1 when one was refused', async () => {
  const file = jsonl('cli-batch', [
    { workflow: GREETING, inputs: { name: 'Ada', tone: 'casual' } },
    { workflow: GREETING, inputs: { name: 'Bob', colour: 'red' } },
    { workflow: GREETING, inputs: { name: 'Cy', tone: 'formal' }, metadata: { from: 'cli-batch' } },
  ]);
  const r = await wr(['batch', file, '--idempotency-key', `cli-batch-${Date.now()}`], { base: t.base });
  assert.is(r.code, 1, r.stderr);
  const out = lines(r.stdout);
  assert.is(out.length, 3);
  assert.match(out[0]!, /^1\taccepted\t[0-9a-f-]{36}$/);
  assert.match(out[1]!, /^2\trefused\tinvalid_inputs: /);
  assert.match(out[2]!, /^3\taccepted\t[0-9a-f-]{36}$/);
  assert.match(r.stderr, /\[#{30}\] 3\/3 runs sent/);
  assert.match(r.stderr, /2 accepted, 1 refused/);
  const run = await t.call('GET', `/runs/${out[2]!.split('\t')[2]}`, { key: 'wr_demo_key' });
  assert.equal(run.body.metadata, { from: 'cli-batch' });
});

test('wr batch: all accepted is exit code 0; a line that is not JSON is a usage error naming it', async () => {
  const ok = await wr(['batch', jsonl('cli-batch-ok', [{ workflow: GREETING, inputs: { name: 'Di' } }]), '--json'], { base: t.base });
  assert.is(ok.code, 0, ok.stderr);
  assert.ok(JSON.parse(lines(ok.stdout)[0]!).run.id);
  const file = join(ROOT, '.tmp', `cli-batch-bad-${process.pid}.jsonl`);
  writeFileSync(file, `${JSON.stringify({ workflow: GREETING })}\n{nope\n`);
  const bad = await wr(['batch', file], { base: t.base });
  assert.is(bad.code, 2);
  assert.match(bad.stderr, /line 2 is not JSON/);
});

test('client.startRuns: items in order, retried under one key (the same runs)', async () => {
  const client = new WorkflowRunClient({ apiKey: 'wr_demo_key', baseUrl: t.base });
  const runs: StartRunsItem[] = [
    { workflow: GREETING, inputs: { name: 'Ed' } },
    { workflow: GREETING, inputs: { nope: 1 } },
  ];
  const first = await client.startRuns(runs, { idempotencyKey: `client-batch-${Date.now()}` });
  assert.is(first.accepted, 1);
  assert.is(first.refused, 1);
  const again = await client.startRuns(runs, { idempotencyKey: first.idempotencyKey });
  assert.equal(again.items, first.items);
});

test.run();
