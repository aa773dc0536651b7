import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import { batch } from './batch.ts';
import * as cmd from './commands.ts';
import * as sets from './runs-in-sets.ts';
import { oneLine } from './format.ts';
import { UsageError } from './inputs.ts';

/**
 * `wr`, the command line of the Workflow Run API (docs/client.md). Configuration comes from the
 * environment: WR_API_KEY (required) and WR_BASE_URL (default http://localhost:8080/v1). Every failure is
 * one line on stderr; the exit code is 0 only for success (for `wr run`: only for a `completed` run).
 */
const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
const io: cmd.Io = { stdout: process.stdout, stderr: process.stderr, env: process.env };
const collect = (value: string, all: string[]) => [...all, value];
let code = 0;
const set = (p: Promise<number>) => p.then((c) => void (code = c));

const program = new Command('wr')
  .description('Workflow Run API from the terminal (WR_API_KEY, WR_BASE_URL)')
  .version(version, '-V, --cli-version', 'print the CLI version')
  .showHelpAfterError('(wr --help for usage)')
  .exitOverride();

const workflows = program.command('workflows').description('runnable workflows');
workflows
  .command('list')
  .description('list the workflows you can see')
  .option('-q, --q <text>', 'match name or description')
  .option('--limit <n>', 'page size (1..50)')
  .option('--offset <n>', 'rows to skip')
  .option('--json', 'print the page as JSON')
  .action((opts) => set(cmd.workflowsList(io, opts)));
workflows
  .command('show')
  .argument('<id>', 'workflow id')
  .description('a workflow with its input schema')
  .option('--json', 'print the workflow as JSON')
  .action((id, opts) => set(cmd.workflowsShow(io, id, opts)));

program
  .command('run')
  .argument('<workflow>', 'workflow id')
  .description('start a run and follow its progress live (exit code 0 only when it completes)')
  .option('-i, --input <name=value>', 'an input by nodeId or name (repeatable)', collect, [])
  .option('--version <id>', 'the workflow version to run')
  .option('--wait', 'no live progress: wait for the end, then print the result')
  .option('--json', 'print only the final Run as JSON')
  .option('--idempotency-key <key>', 'reuse a key to retry a start safely (default: a new one)')
  .option('--metadata <key=value>', 'a label of the run (repeatable; no secrets)', collect, [])
  .option('--cancel-after <duration>', 'cancel the run if it has not ended after this long: 30s, 5m, 1h (at most 24h)')
  .option('--start-after <duration>', 'start the run this much later: 30s, 10m, 2h, 7d (at most 7 days)')
  .option('--debounce <key,delay,maxDelay>', 'join the waiting run of this key instead of starting another: doc-42,5s,60s')
  .option('--priority <priority>', 'high | normal | low (high needs an API key allowed it)')
  .option('--concurrency-key <key>', 'your customer or tenant: admission goes round robin across keys')
  .action((workflow, opts) => set(cmd.run(io, workflow, opts)));

program
  .command('batch')
  .argument('<file>', 'a JSON Lines file (- for stdin): one run a line, each what POST /runs takes')
  .description('start many runs, 1,000 a call: a progress bar, one result line per run (exit code 1 if any was refused)')
  .option('--idempotency-key <key>', 'rerun the same command safely: batch n is sent under <key>:n')
  .option('--cancel-after <duration>', 'cancel each run if it has not ended after this long: 30s, 5m, 1h (at most 24h)')
  .option('--start-after <duration>', 'start each run this much later: 30s, 10m, 2h, 7d (at most 7 days)')
  .option('--json', 'print each result as a JSON line')
  .action((file, opts) => set(batch(io, file, opts)));

const runs = program.command('runs').description('your runs');
runs
  .command('list')
  .description('run history, newest first')
  .option('--status <status>', 'pending | running | completed | failed | cancelled')
  .option('--workflow <id>', 'only runs of this workflow')
  .option('--metadata <key=value>', 'only runs with this metadata pair (repeatable: all must match)', collect, [])
  .option('--concurrency-key <key>', 'only runs started with this concurrency key')
  .option('--since <date-time>', 'only runs created at or after this instant (RFC 3339)')
  .option('--until <date-time>', 'only runs created before this instant (RFC 3339)')
  .option('--limit <n>', 'page size (1..50)')
  .option('--offset <n>', 'rows to skip')
  .option('--json', 'print the page as JSON')
  .action((opts) => set(cmd.runsList(io, opts)));
runs
  .command('get')
  .argument('<id>', 'run id')
  .description('a run: status, charge, outputs')
  .option('--json', 'print the Run as JSON')
  .action((id, opts) => set(cmd.runsGet(io, id, opts)));
runs
  .command('events')
  .argument('<id>', 'run id')
  .description("a run's event log")
  .option('--after <sequence>', 'only events after this sequence')
  .option('--json', 'print the events as JSON')
  .action((id, opts) => set(cmd.runsEvents(io, id, opts)));
runs
  .command('watch')
  .argument('<id>', 'run id')
  .description('follow a run live (Ctrl-C stops watching; the run goes on)')
  .action((id) => set(cmd.runsWatch(io, id)));
// Runs in sets: cancel by filter, replay (./runs-in-sets.ts).
runs
  .command('cancel')
  .argument('[id]', 'run id (or a filter instead)')
  .description('cancel a run in flight, or every run a filter matches')
  .option('--status <status>', 'pending | running | completed | failed | cancelled (repeatable)', collect, [])
  .option('--workflow <id>', 'only runs of this workflow')
  .option('--metadata <key=value>', 'only runs with this metadata pair (repeatable: all must match)', collect, [])
  .option('--since <date-time>', 'only runs created at or after this instant (RFC 3339)')
  .option('--until <date-time>', 'only runs created before this instant (RFC 3339)')
  .option('--dry-run', 'count what would be cancelled, change nothing')
  .option('--json', 'print the answer as JSON')
  .action((id, opts) => set(id ? cmd.runsCancel(io, id, opts) : sets.runsCancelMany(io, opts)));
runs
  .command('reschedule')
  .argument('<id>', 'run id')
  .argument('<start-at>', 'the new start, an RFC 3339 instant (at most 7 days ahead; now or earlier: at once)')
  .description('move the start of a run still waiting for its delayed start')
  .option('--json', 'print the Run as JSON')
  .action((id, startAt, opts) => set(cmd.runsReschedule(io, id, startAt, opts)));
runs
  .command('replay')
  .argument('<id>', 'run id')
  .description("start a new run with a run's inputs (password inputs must be given again)")
  .option('-i, --input <name=value>', 'an input to change or give again, by nodeId or name (repeatable)', collect, [])
  .option('--current-version', "run the workflow's current version instead of the run's")
  .option('--metadata <key=value>', "the new run's labels instead of the run's (repeatable)", collect, [])
  .option('--idempotency-key <key>', 'reuse a key to retry a replay safely')
  .option('--json', 'print the new run as JSON')
  .action((id, opts) => set(sets.runsReplay(io, id, opts)));

try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (err instanceof CommanderError) {
    // Commander printed its message (or the help/version) already.
    code = err.exitCode === 0 ? 0 : cmd.EXIT.usage;
  } else {
    process.stderr.write(`wr: ${oneLine(err, { workflow: (err as { workflow?: string }).workflow })}\n`);
    code = err instanceof UsageError ? cmd.EXIT.usage : cmd.EXIT.error;
  }
}
process.exitCode = code;
