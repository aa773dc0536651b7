import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { startDemoService } from '../helpers/service-process.ts';
import { waitFor } from '../helpers/wait-for.ts';

/**
 * The README's "Try it" commands, run as written with bash, curl and jq against the service started as
 * `npm start` starts it (demo catalog, embedded engine), and what each prints. Two things differ from a
 * reader's terminal, neither in the commands' text: the address (`http://localhost:8080` becomes the
 * port the test service got, since 8080 may be taken here), and `curl -N` (the SSE stream, which ends
 * only with the run) gets `--max-time` from a shell function wrapping curl, so a stream that never ends
 * fails the test instead of hanging it (and `--no-progress-meter`, as a terminal would have it). Commands that need an external service (OpenAI: `…f002`,
 * OPENAI_API_KEY) are not run; the block has none today. Every command run must have an expectation
 * below, so a command added to the README without one fails here.
 */

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const README_ADDRESS = 'http://localhost:8080';
const NEEDS_EXTERNAL_SERVICE = /OPENAI|00000000f002/;
const GREETING = '00000000-0000-4000-8000-00000000f001';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** What one command printed, and `$RUN` before and after it. */
interface Ran {
  command: string;
  out: string;
  runBefore: string;
  runAfter: string;
}

/** The shell commands of the README's "Try it" section: its ```sh blocks, continuation lines joined, comments dropped. */
function tryItCommands(readme: string): string[] {
  const section = /^## Try it[^\n]*\n([\s\S]*?)(?=^## )/m.exec(readme)?.[1] ?? '';
  const blocks = [...section.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);
  return blocks
    .flatMap((block) => block.split(/(?<!\\)\n/))
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
}

/** Runs the commands in one bash, in order, printing a marker with `$RUN` before each; splits the output by command. */
async function runInBash(commands: string[], base: string): Promise<{ ran: Ran[]; code: number | null; stderr: string }> {
  const marker = (i: number | 'end') => `printf '\\n@@%s %s\\n' ${i} "\${RUN-}"`;
  const script = [
    // Bounds the stream's time; and as on a terminal no progress meter (curl shows it when its output is a pipe).
    `curl() { case " $* " in *" -N "*) command curl --max-time 60 --no-progress-meter "$@" ;; *) command curl "$@" ;; esac; }`,
    ...commands.flatMap((command, i) => [marker(i), command.replaceAll(README_ADDRESS, base)]),
    marker('end'),
  ].join('\n');
  const child = spawn('/bin/bash', ['-c', script], { cwd: ROOT, env: { PATH: process.env.PATH }, stdio: ['ignore', 'pipe', 'pipe'], timeout: 180_000 });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
  child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
  const code = await new Promise<number | null>((r) => child.on('close', r));
  const parts = stdout.split(/\n?@@(\d+|end) (\S*)\n/);
  const ran: Ran[] = commands.map((command, i) => ({
    command,
    out: (parts[3 + 3 * i] ?? '').trim(),
    runBefore: parts[2 + 3 * i] ?? '',
    runAfter: parts[5 + 3 * i] ?? '',
  }));
  return { ran, code, stderr };
}

/** jq's output: pretty JSON values one after another. */
function jsonValues(out: string): unknown[] {
  return JSON.parse(`[${out.replace(/([}\]])\n(?=[{[])/g, '$1,')}]`) as unknown[];
}

let service: Awaited<ReturnType<typeof startDemoService>>;
let base: string;
const auth = { authorization: 'Bearer wr_demo_key' };
const getRun = async (id: string) => (await (await fetch(`${base}/runs/${id}`, { headers: auth })).json()) as { status: string; outputs: unknown[] };

test.before(async () => {
  service = await startDemoService();
  base = service.base;
});
test.after(async () => {
  await service?.stop();
});

test("the README's Try-it commands run as written and print what the README says", async () => {
  const all = tryItCommands(readFileSync(`${ROOT}README.md`, 'utf8'));
  const commands = all.filter((c) => !NEEDS_EXTERNAL_SERVICE.test(c));
  assert.ok(commands.length >= 9, `the Try-it block was found: ${JSON.stringify(all)}`);
  const { ran, code, stderr } = await runInBash(commands, base.replace(/\/v1$/, ''));
  assert.is(stderr, '', 'nothing went to stderr (no curl or jq error)');
  assert.is(code, 0);

  const expectations: [RegExp, (r: Ran) => Promise<void> | void][] = [
    [/^KEY=wr_demo_key; API=/, (r) => assert.is(r.out, '')],
    [
      /\$API\/workflows \| jq/,
      (r) => {
        const rows = jsonValues(r.out) as Record<string, unknown>[];
        assert.ok(rows.length >= 5, r.out);
        for (const row of rows) assert.equal(Object.keys(row), ['id', 'name', 'userAccess', 'displayedRunPriceUsd']);
        assert.equal(rows.find((w) => w.id === GREETING)?.name, 'Greeting');
      },
    ],
    [
      /\/workflows\/\S+f001 \| jq \.inputSchema/,
      (r) =>
        assert.equal(
          (jsonValues(r.out)[0] as { nodeId: string }[]).map((f) => f.nodeId),
          ['name', 'times', 'tone'],
        ),
    ],
    [/^RUN=[\s\S]*greet-ada-1[\s\S]*f001/, (r) => assert.match(r.runAfter, UUID)],
    [
      /\$API\/runs\/\$RUN \| jq/,
      async (r) => {
        const shown = jsonValues(r.out)[0] as { status: string };
        assert.equal(Object.keys(shown), ['status', 'outcome', 'displayedChargeUsd', 'outputs']);
        assert.ok(['pending', 'running', 'completed'].includes(shown.status), r.out);
        // "poll": the run completes with the greeting.
        const done = await waitFor(
          'the greeting run to complete',
          async () => {
            const run = await getRun(r.runBefore);
            return run.status === 'completed' && run;
          },
          20_000,
          200,
        );
        assert.equal(done.outputs, [{ name: 'greeting', type: 'text', value: 'Hey Ada! Great to see you (x1).', nodeId: 'casual_greeting' }]);
      },
    ],
    [
      /\/runs\/\$RUN\/events \| jq/,
      (r) => {
        const events = jsonValues(r.out) as [number, string, string | null, unknown][];
        assert.equal(events[0]!.slice(0, 2), [1, 'run.queued']);
        assert.equal(
          events.map((e) => e[0]),
          events.map((_, i) => i + 1),
          'every event, in sequence order',
        );
      },
    ],
    [/^RUN=[\s\S]*00000000f004/, (r) => assert.ok(UUID.test(r.runAfter) && r.runAfter !== r.runBefore, `a new run: ${r.runBefore} → ${r.runAfter}`)],
    [
      /^curl -N .*\/stream$/,
      (r) => {
        const events = [...r.out.matchAll(/^event: (\S+)$/gm)].map((m) => m[1]);
        assert.is(events[0], 'snapshot', r.out);
        assert.ok(events.indexOf('run.started') < events.indexOf('run.suspended'), r.out);
        assert.ok(events.indexOf('run.suspended') < events.indexOf('run.resumed'), r.out);
        assert.is(events.at(-1), 'run.completed', 'the stream shows the run to its end, then closes');
        assert.match(r.out, /^event: run\.suspended\ndata: .*"reason":"wait_timer"/m);
      },
    ],
    [
      /\/runs\/\$RUN\/cancel$/,
      async (r) => {
        assert.equal(JSON.parse(r.out), { id: r.runBefore, status: 'cancelled', cancelRequested: true });
        assert.is((await getRun(r.runBefore)).status, 'cancelled');
      },
    ],
  ];
  for (const r of ran) {
    const matching = expectations.filter(([pattern]) => pattern.test(r.command));
    assert.ok(matching.length > 0, `no expectation for the README command: ${r.command}`);
    for (const [, check] of matching) await check(r);
  }
  assert.equal(
    ran.filter((r) => r.command.includes('00000000f004')).map((r) => r.runAfter !== r.runBefore),
    [true, true],
    'two …f004 runs: the one streamed, and another one cancelled while it waits',
  );
});

test.run();
