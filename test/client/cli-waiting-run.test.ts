import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { WorkflowRunClient } from '../../src/client/src/index.ts';
import { startDemoService } from '../helpers/service-process.ts';
import { lines, wr } from './helpers/wr-process.ts';

/**
 * `wr` on runs that wait, both as real processes: the service started as `npm start` does (demo catalog,
 * embedded engine) and the CLI. While a run waits the CLI says so as it happens, why, and what the buyer
 * can do; Ctrl-C names the run and the command that follows it again.
 */

const BYOK_HAIKU = '00000000-0000-4000-8000-00000000f003';
const PARSE_LATER = '00000000-0000-4000-8000-00000000f004';
const RUN_ID = /^run ([0-9a-f-]{36})/m;
let service: Awaited<ReturnType<typeof startDemoService>>;
let base: string;

test.before(async () => {
  service = await startDemoService();
  base = service.base;
});
test.after(async () => {
  await service?.stop();
});

test('wr run BYOK --wait says at once that the run waits for credentials and what to do; Ctrl-C names the run and how to follow it again', async () => {
  let sent = false;
  const r = await wr(['run', BYOK_HAIKU, '--input', 'topic=rain', '--wait'], {
    base,
    onOutput: (out, child) => {
      if (!sent && out.stderr.includes('supplyRunCredentials')) {
        sent = true;
        // As a person would: a while later, with the stream silent (only heartbeats) meanwhile.
        setTimeout(() => child.kill('SIGINT'), 8000);
      }
    },
  });
  assert.ok(sent, `no word of the wait:\n${r.stdout}${r.stderr}`);
  assert.is(r.code, 130, r.stderr);
  assert.is(r.stdout, '', 'the result (stdout) stays empty: the run has not ended');
  const id = RUN_ID.exec(r.stderr)?.[1];
  assert.ok(id, r.stderr);
  assert.match(r.stderr, /run suspended \(wait_signal\): it waits for provider credentials/);
  assert.match(r.stderr, `supplyRunCredentials`);
  assert.match(r.stderr, `wr runs cancel ${id}`);
  assert.match(lines(r.stderr).at(-1)!, `stopped following run ${id}; it goes on. Follow it again: wr runs watch ${id}`);

  const client = new WorkflowRunClient({ apiKey: 'wr_demo_key', baseUrl: base });
  assert.is((await client.getRun(id)).status, 'suspended', 'Ctrl-C left the run alone');

  // The command it printed follows the run again (live, on stdout) and ends when the run is cancelled.
  let cancelled = false;
  const watched = await wr(['runs', 'watch', id], {
    base,
    onOutput: (out) => {
      if (!cancelled && out.stdout.includes(`wr runs cancel ${id}`)) {
        cancelled = true;
        void wr(['runs', 'cancel', id], { base });
      }
    },
  });
  assert.ok(cancelled, watched.stdout + watched.stderr);
  assert.is(watched.code, 1, watched.stderr);
  assert.match(watched.stdout, /run suspended \(wait_signal\): it waits for provider credentials[\s\S]*✖ cancelled · not charged/);
});

test('wr run --wait shows each status change on stderr as it happens, then the result alone on stdout', async () => {
  const seen: string[] = [];
  const r = await wr(['run', PARSE_LATER, '--wait'], {
    base,
    onOutput: (out) => {
      if (out.stderr.includes('run suspended') && !seen.length) seen.push(out.stdout);
    },
  });
  assert.is(r.code, 0, r.stderr);
  assert.equal(seen, [''], 'the suspension was shown before the result');
  const id = RUN_ID.exec(r.stderr)?.[1];
  assert.ok(id, r.stderr);
  const [first, ...changes] = lines(r.stderr);
  assert.match(first!, new RegExp(`^run ${id} · (pending|running|suspended)`));
  assert.equal(changes, ['run started', 'run suspended (wait_timer): a timer; it resumes by itself', 'run resumed']);
  assert.equal(lines(r.stdout), [`run ${id}: completed · charged $0.0001`, '  greeting: hello', '  items: [1,2,3]']);

  const json = await wr(['run', PARSE_LATER, '--json'], { base });
  assert.is(json.code, 0, json.stderr);
  assert.is(JSON.parse(json.stdout).status, 'completed', 'stdout is the Run as JSON, nothing else');
  assert.match(json.stderr, /run suspended \(wait_timer\)/);
});

test.run();
