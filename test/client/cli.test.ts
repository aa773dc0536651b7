import { spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { WorkflowRunClient } from '../../src/client/src/index.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { lines, ROOT, wr as runWr, type WrOptions, type WrResult } from './helpers/wr-process.ts';

/**
 * The `wr` CLI as a real child process (node_modules/.bin/wr, what `npx wr` runs) against the real
 * service with the demo catalog and the embedded engine: the command of the README's "try it", the
 * JSON mode, exit codes, one-line errors, Ctrl-C while watching, and the read commands.
 */

const GREETING = '00000000-0000-4000-8000-00000000f001';
const PARSE_LATER = '00000000-0000-4000-8000-00000000f004';
const FETCH_PAGE = '00000000-0000-4000-8000-00000000f005';
let t: TestApp;

test.before(async () => {
  t = await startTestApp({ catalog: `${ROOT}catalog/demo.yaml`, engine: 'app' });
});
test.after(async () => {
  await t?.close();
});

function wr(args: string[], opts: Omit<WrOptions, 'base' | 'onOutput'> & { onStdout?: (all: string, child: ChildProcess) => void } = {}): Promise<WrResult> {
  const { onStdout, ...rest } = opts;
  return runWr(args, { ...rest, base: t.base, ...(onStdout ? { onOutput: (out, child) => onStdout(out.stdout, child) } : {}) });
}

test('wr run GREETING --input name=Ada --input tone=casual shows the nodes and the text, ends completed with its charge, exit code 0', async () => {
  const r = await wr(['run', GREETING, '--input', 'name=Ada', '--input', 'tone=casual']);
  assert.is(r.code, 0, r.stderr);
  assert.is(r.stderr, '');
  assert.match(r.stdout, /^run [0-9a-f-]{36}/);
  assert.match(r.stdout, /casual_text │ Hey Ada! Great to see you \(x1\)\./, 'the text as it arrived');
  assert.match(r.stdout, /✔ casual_text done/);
  assert.match(r.stdout, /○ formal_text skipped \(condition_false\)/);
  assert.match(lines(r.stdout).at(-2)!, /^✔ completed · charged \$0\.0001$/);
  assert.is(lines(r.stdout).at(-1), '  greeting: Hey Ada! Great to see you (x1).');
});

test('wr run --json prints only the final Run as JSON', async () => {
  const r = await wr(['run', GREETING, '--input', 'name=Ada', '--input', 'tone=formal', '--json']);
  assert.is(r.code, 0, r.stderr);
  const run = JSON.parse(r.stdout);
  assert.equal([run.status, run.outcome, run.billingStatus], ['completed', 'completed', 'settled']);
  assert.equal(
    run.outputs.map((o: { value: string }) => o.value),
    ['Good day, Ada. It is a pleasure to meet you.'],
  );
  const fetched = await t.call('GET', `/runs/${run.id}`, { key: 'wr_demo_key' });
  assert.equal(run, fetched.body);
});

test('wr run --metadata k=v --cancel-after 5m labels the run and sets its deadline; wr runs list --metadata k=v --since finds it', async () => {
  const since = new Date(Date.now() - 60_000).toISOString();
  const label = `cli-${Date.now()}`;
  const r = await wr([
    'run',
    GREETING,
    '--input',
    'name=Ada',
    '--input',
    'tone=formal',
    '--metadata',
    `batch=${label}`,
    '--metadata',
    'note=a=b',
    '--cancel-after',
    '5m',
    '--json',
  ]);
  assert.is(r.code, 0, r.stderr);
  const run = JSON.parse(r.stdout);
  assert.equal(run.metadata, { batch: label, note: 'a=b' });
  assert.ok(run.deadline && Date.parse(run.deadline) > Date.now(), `the deadline is ahead: ${run.deadline}`);
  const list = await wr(['runs', 'list', '--metadata', `batch=${label}`, '--since', since, '--json']);
  assert.is(list.code, 0, list.stderr);
  assert.equal(
    JSON.parse(list.stdout).runs.map((row: { id: string }) => row.id),
    [run.id],
  );
  const none = await wr(['runs', 'list', '--metadata', `batch=${label}`, '--until', since, '--json']);
  assert.equal(JSON.parse(none.stdout).runs, []);
  const bad = await wr(['run', GREETING, '--input', 'name=Ada', '--cancel-after', '2d']);
  assert.is.not(bad.code, 0);
  assert.match(bad.stderr, /Cancel-After/);
});

test('a run that fails exits non-zero with its reason (--wait)', async () => {
  // A private address is blocked for http.request nodes: the node fails, the run has no output.
  const r = await wr(['run', FETCH_PAGE, '--input', 'url=http://127.0.0.1:9/', '--wait']);
  assert.is(r.code, 1, r.stdout + r.stderr);
  assert.match(r.stdout, /^run [0-9a-f-]{36}: failed — .+ · not charged/);
});

test('errors are one clear line on stderr with a non-zero exit: unknown workflow, invalid inputs with details, missing key, refused key', async () => {
  const unknown = await wr(['run', '00000000-0000-4000-8000-0000000000ff', '--input', 'name=Ada']);
  assert.is(unknown.code, 1);
  assert.equal(lines(unknown.stderr), ['wr: unknown workflow 00000000-0000-4000-8000-0000000000ff (not_found: workflow not found)']);
  assert.is(unknown.stdout, '');

  const invalid = await wr(['run', GREETING, '--input', 'nam=Ada', '--input', 'tone=loud']);
  assert.is(invalid.code, 1);
  assert.is(lines(invalid.stderr).length, 1);
  assert.match(invalid.stderr, /^wr: invalid inputs: .*nam: .*name: .*required.*tone: .*casual/);

  const missing = await wr(['workflows', 'list'], { env: { WR_API_KEY: undefined } });
  assert.is(missing.code, 2);
  assert.equal(lines(missing.stderr), ['wr: WR_API_KEY is not set: export WR_API_KEY=<your secret API key> (the demo catalog has wr_demo_key)']);

  const refused = await wr(['runs', 'list'], { env: { WR_API_KEY: 'wr_wrong' } });
  assert.is(refused.code, 1);
  assert.is(lines(refused.stderr).length, 1);
  assert.match(refused.stderr, /^wr: the API key was refused \(unauthorized/);

  const usage = await wr(['run', GREETING, '--input', 'no-equals-sign']);
  assert.is(usage.code, 2);
  assert.equal(lines(usage.stderr), ['wr: --input expects NAME=VALUE, got "no-equals-sign"']);
});

test('Ctrl-C while watching stops watching, not the run: exit 130, and the run completes', async () => {
  let sent = false;
  const r = await wr(['run', PARSE_LATER], {
    onStdout: (out, child) => {
      if (!sent && out.includes('run suspended (wait_timer)')) {
        sent = true;
        child.kill('SIGINT');
      }
    },
  });
  assert.ok(sent, r.stdout);
  assert.is(r.code, 130, r.stderr);
  const id = /^run ([0-9a-f-]{36})/.exec(r.stdout)![1]!;
  assert.match(r.stderr, `stopped following run ${id}; it goes on. Follow it again: wr runs watch ${id}`);
  const client = new WorkflowRunClient({ apiKey: 'wr_demo_key', baseUrl: t.base });
  const run = await client.waitForRun(id, { timeoutMs: 20_000 });
  assert.is(run.status, 'completed');

  const watched = await wr(['runs', 'watch', id]);
  assert.is(watched.code, 0, watched.stderr);
  assert.match(watched.stdout, /run suspended \(wait_timer\)[\s\S]*✔ completed/);
});

test('workflows list / show (the input schema as a table), runs list / get / events / cancel', async () => {
  const list = await wr(['workflows', 'list']);
  assert.is(list.code, 0, list.stderr);
  assert.match(lines(list.stdout)[0]!, /^ID\s+NAME\s+ACCESS\s+PRICE\s+RUNNABLE$/);
  assert.match(list.stdout, new RegExp(`${GREETING}\\s+Greeting\\s+wallet`));

  const show = await wr(['workflows', 'show', GREETING]);
  assert.is(show.code, 0, show.stderr);
  assert.match(show.stdout, /INPUT\s+NAME\s+TYPE\s+REQUIRED\s+DEFAULT\s+OPTIONS \/ DESCRIPTION/);
  assert.match(show.stdout, /\ntone\s+Tone\s+dropdown\s+no\s+casual\s+casual \| formal\n/);
  assert.match(show.stdout, /\nname\s+Name\s+text\s+yes\s+Who to greet\n/);

  const started = JSON.parse((await wr(['run', PARSE_LATER, '--json', '--wait'])).stdout);
  const runs = await wr(['runs', 'list', '--json', '--limit', '5']);
  assert.ok(JSON.parse(runs.stdout).runs.some((r: { id: string }) => r.id === started.id));
  const get = await wr(['runs', 'get', started.id]);
  assert.match(get.stdout, new RegExp(`^run ${started.id}: completed · charged \\$0\\.0001`));
  const events = await wr(['runs', 'events', started.id]);
  assert.match(lines(events.stdout)[1]!, /^1\s+\S+\s+run\.queued\s+\{"status":"pending"\}$/);
  assert.match(events.stdout, /run\.completed/);

  const running = await t.call('POST', '/runs', { key: 'wr_demo_key', body: { workflow: PARSE_LATER } });
  const cancel = await wr(['runs', 'cancel', running.body.run.id]);
  assert.equal([cancel.code, cancel.stdout.trim()], [0, `run ${running.body.run.id} cancelled`]);
  const again = await wr(['runs', 'cancel', running.body.run.id]);
  assert.is(again.stdout.trim(), `run ${running.body.run.id} was already cancelled; nothing to cancel`);
});

const SYSTEM_NODE = '/usr/bin/node';
const systemMajor = existsSync(SYSTEM_NODE) ? Number(/^v(\d+)/.exec(spawnSync(SYSTEM_NODE, ['--version']).stdout.toString())?.[1]) : NaN;
if (Number.isNaN(systemMajor) || systemMajor >= 22) {
  console.log(`  wr on an older system Node: not run (${SYSTEM_NODE} is ${Number.isNaN(systemMajor) ? 'absent' : `v${systemMajor}`})`);
} else {
  test(`the bin runs on the system Node ${systemMajor} too (no build step)`, async () => {
    const r = await wr(['run', GREETING, '--input', 'name=Ada', '--json'], { node: SYSTEM_NODE });
    assert.is(r.code, 0, r.stderr);
    assert.is(JSON.parse(r.stdout).status, 'completed');
  });
}

test.run();
