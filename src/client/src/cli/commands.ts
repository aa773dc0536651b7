import { WorkflowRunClient, type StartRunOptions } from '../client.ts';
import type { Run, RunStatus } from '../types.ts';
import { charge, showValue, table, usd } from './format.ts';
import { parseInputs, UsageError } from './inputs.ts';
import { Progress } from './progress.ts';

/** Exit codes: 0 the run completed (or the command succeeded), 1 the run ended otherwise or a call failed, 2 a usage error, 130 Ctrl-C while watching. */
export const EXIT = { ok: 0, notCompleted: 1, error: 1, usage: 2, interrupted: 130 } as const;

export interface Io {
  stdout: NodeJS.WriteStream;
  stderr: NodeJS.WriteStream;
  env: NodeJS.ProcessEnv;
}

export function clientFrom(env: NodeJS.ProcessEnv): WorkflowRunClient {
  const apiKey = env.WR_API_KEY?.trim();
  if (!apiKey) throw new UsageError('WR_API_KEY is not set: export WR_API_KEY=<your secret API key> (the demo catalog has wr_demo_key)');
  return new WorkflowRunClient({ apiKey, baseUrl: env.WR_BASE_URL?.trim() || undefined, userAgent: 'wr-cli' });
}

const print = (io: Io, text: string) => io.stdout.write(`${text}\n`);
const json = (io: Io, value: unknown) => print(io, JSON.stringify(value, null, 2));

export async function workflowsList(io: Io, opts: { json?: boolean; limit?: string; offset?: string; q?: string }): Promise<number> {
  const page = await clientFrom(io.env).listWorkflows({ limit: int(opts.limit, 50), offset: int(opts.offset, 0), ...(opts.q ? { q: opts.q } : {}) });
  if (opts.json) return (json(io, page), EXIT.ok);
  const rows = page.workflows.map((w) => [w.id, w.name, w.userAccess, usd(w.displayedRunPriceUsd), w.apiRunnableNow ? 'yes' : 'no']);
  print(io, table(['ID', 'NAME', 'ACCESS', 'PRICE', 'RUNNABLE'], rows));
  if (page.pagination.hasMore) print(io, `… more: --offset ${page.pagination.offset + page.pagination.limit}`);
  return EXIT.ok;
}

export async function workflowsShow(io: Io, id: string, opts: { json?: boolean }): Promise<number> {
  const w = await withWorkflow(id, () => clientFrom(io.env).getWorkflow(id));
  if (opts.json) return (json(io, w), EXIT.ok);
  print(io, `${w.name}  (${w.id})`);
  if (w.description) print(io, w.description);
  print(
    io,
    `version ${w.versionLabel ?? '—'} (${w.versionId ?? '—'}) · ${w.runModel} · ${w.userAccess}` +
      ` · price ${usd(w.displayedRunPriceUsd)} · runnable ${w.apiRunnableNow ? 'yes' : 'no'}`,
  );
  print(io, '');
  const rows = w.inputSchema.map((f) => [
    f.nodeId,
    f.name,
    f.type,
    f.required ? 'yes' : 'no',
    f.defaultValue ?? '',
    f.options ? f.options.map((o) => o.value).join(' | ') : (f.description ?? ''),
  ]);
  print(io, rows.length ? table(['INPUT', 'NAME', 'TYPE', 'REQUIRED', 'DEFAULT', 'OPTIONS / DESCRIPTION'], rows) : 'no inputs');
  return EXIT.ok;
}

export interface RunOpts {
  input: string[];
  version?: string;
  wait?: boolean;
  json?: boolean;
  idempotencyKey?: string;
  metadata?: string[];
  cancelAfter?: string;
  priority?: string;
  concurrencyKey?: string;
  startAfter?: string;
  debounce?: string;
}

/** `--debounce key,delay,maxDelay` (the key may hold commas: the last two fields are the durations). */
export function debounceOf(text: string | undefined): { key: string; delay: string; maxDelay: string } | undefined {
  if (text === undefined) return undefined;
  const parts = text.split(',');
  if (parts.length < 3) throw new UsageError(`--debounce takes key,delay,maxDelay (e.g. doc-42,5s,60s), not "${text}"`);
  const maxDelay = parts.pop()!;
  const delay = parts.pop()!;
  return { key: parts.join(','), delay, maxDelay };
}

/** `--metadata k=v` options as an object (the value may hold `=`). */
export function metadataOf(pairs: string[] | undefined): Record<string, string> | undefined {
  if (!pairs?.length) return undefined;
  return Object.fromEntries(
    pairs.map((pair) => {
      const cut = pair.indexOf('=');
      if (cut <= 0) throw new Error(`--metadata takes key=value, not "${pair}"`);
      return [pair.slice(0, cut), pair.slice(cut + 1)];
    }),
  );
}

const PRIORITIES = ['high', 'normal', 'low'] as const;

/** `--priority` and `--concurrency-key` as the start's options (the service checks the key's length and rights). */
export function flowOf(opts: Pick<RunOpts, 'priority' | 'concurrencyKey'>): Pick<StartRunOptions, 'priority' | 'concurrencyKey'> {
  const priority = opts.priority as StartRunOptions['priority'];
  if (priority !== undefined && !PRIORITIES.includes(priority)) throw new UsageError(`--priority takes ${PRIORITIES.join(', ')}, not "${opts.priority}"`);
  return { ...(priority ? { priority } : {}), ...(opts.concurrencyKey === undefined ? {} : { concurrencyKey: opts.concurrencyKey }) };
}

export async function run(io: Io, workflow: string, opts: RunOpts): Promise<number> {
  const client = clientFrom(io.env);
  const detail = await withWorkflow(workflow, () => client.getWorkflow(workflow));
  const inputs = parseInputs(opts.input, detail.inputSchema);
  const idempotencyKey = opts.idempotencyKey ?? globalThis.crypto.randomUUID();
  const ctrlC = onCtrlC();
  try {
    let runId: string;
    try {
      const extra = {
        metadata: metadataOf(opts.metadata),
        cancelAfter: opts.cancelAfter,
        startAfter: opts.startAfter,
        debounce: debounceOf(opts.debounce),
        ...flowOf(opts),
      };
      const started = await client.startRun(workflow, { inputs, version: opts.version, idempotencyKey, ...extra, signal: ctrlC.signal });
      runId = started.id;
      if (started.debounced) io.stderr.write(`joined the waiting run ${runId} of debounce key ${extra.debounce!.key}\n`);
    } catch (err) {
      if (!ctrlC.signal.aborted) throw err;
      io.stderr.write(`stopped before the service answered; if the run was started, this command with --idempotency-key ${idempotencyKey} finds it\n`);
      return EXIT.interrupted;
    }
    return await follow(io, client, runId, ctrlC.signal, opts.json ? 'json' : opts.wait ? 'result' : 'live');
  } finally {
    ctrlC.dispose();
  }
}

export async function runsWatch(io: Io, id: string): Promise<number> {
  const ctrlC = onCtrlC();
  try {
    return await follow(io, clientFrom(io.env), id, ctrlC.signal, 'live');
  } finally {
    ctrlC.dispose();
  }
}

/** Ctrl-C (SIGINT) aborts `signal` instead of ending the process, so the CLI can say where the run is. */
function onCtrlC(): { signal: AbortSignal; dispose: () => void } {
  const stop = new AbortController();
  const abort = () => stop.abort();
  process.once('SIGINT', abort);
  return { signal: stop.signal, dispose: () => process.removeListener('SIGINT', abort) };
}

/**
 * Follows a run over its stream until it ends. `live`: node progress, then the summary, on stdout.
 * `result` and `json` (`wr run --wait` / `--json`): the run's status changes on stderr as they happen
 * (a wait for credentials says what to do), and only the result on stdout. Ctrl-C stops following,
 * never the run, and names the command that follows it again.
 */
async function follow(io: Io, client: WorkflowRunClient, runId: string, signal: AbortSignal, show: 'live' | 'result' | 'json'): Promise<number> {
  const progress = show === 'live' ? new Progress(io.stdout) : new Progress(io.stderr, { nodes: false });
  try {
    for await (const item of client.streamRun(runId, { signal })) progress.handle(item);
  } finally {
    progress.stop();
  }
  if (signal.aborted) {
    io.stderr.write(`stopped following run ${runId}; it goes on. Follow it again: wr runs watch ${runId}\n`);
    return EXIT.interrupted;
  }
  const final = await client.getRun(runId);
  if (show === 'live') progress.summary(final);
  else if (show === 'json') json(io, final);
  else summarize(io, final);
  return exitFor(final.status);
}

export interface RunsListOpts {
  json?: boolean;
  limit?: string;
  offset?: string;
  status?: string;
  workflow?: string;
  metadata?: string[];
  concurrencyKey?: string;
  since?: string;
  until?: string;
}

export async function runsList(io: Io, opts: RunsListOpts): Promise<number> {
  const metadata = metadataOf(opts.metadata);
  const query = {
    limit: int(opts.limit, 20),
    offset: int(opts.offset, 0),
    ...(opts.status ? { status: opts.status as Exclude<RunStatus, 'suspended'> } : {}),
    ...(opts.workflow ? { workflow: opts.workflow } : {}),
    ...(metadata ? { metadata } : {}),
    ...(opts.concurrencyKey === undefined ? {} : { concurrencyKey: opts.concurrencyKey }),
    ...(opts.since ? { createdAfter: opts.since } : {}),
    ...(opts.until ? { createdBefore: opts.until } : {}),
  };
  const page = await clientFrom(io.env).listRuns(query);
  if (opts.json) return (json(io, page), EXIT.ok);
  const rows = page.runs.map((r) => [r.id, r.status, r.workflowId ?? '—', r.startedAt ?? '—', charge(r)]);
  print(io, table(['ID', 'STATUS', 'WORKFLOW', 'STARTED', 'CHARGE'], rows));
  if (page.pagination.hasMore) print(io, `… more: --offset ${page.pagination.offset + page.pagination.limit}`);
  return EXIT.ok;
}

export async function runsGet(io: Io, id: string, opts: { json?: boolean }): Promise<number> {
  const r = await clientFrom(io.env).getRun(id);
  if (opts.json) json(io, r);
  else summarize(io, r);
  return EXIT.ok;
}

export async function runsEvents(io: Io, id: string, opts: { json?: boolean; after?: string }): Promise<number> {
  const events = await clientFrom(io.env).listRunEvents(id, { afterSequence: int(opts.after, 0) });
  if (opts.json) return (json(io, events), EXIT.ok);
  print(
    io,
    table(
      ['SEQ', 'TS', 'TYPE', 'NODE', 'DATA'],
      events.map((e) => [String(e.sequence), e.ts, e.type, e.nodeId ?? '', JSON.stringify(e.data)]),
    ),
  );
  return EXIT.ok;
}

export async function runsCancel(io: Io, id: string, opts: { json?: boolean }): Promise<number> {
  const r = await clientFrom(io.env).cancelRun(id);
  if (opts.json) return (json(io, r), EXIT.ok);
  print(io, r.cancelRequested ? `run ${r.id} cancelled` : `run ${r.id} was already ${r.status}; nothing to cancel`);
  return EXIT.ok;
}

export async function runsReschedule(io: Io, id: string, startAt: string, opts: { json?: boolean }): Promise<number> {
  const r = await clientFrom(io.env).rescheduleRun(id, startAt);
  if (opts.json) return (json(io, r), EXIT.ok);
  print(io, `run ${r.id} starts at ${r.scheduledFor}`);
  return EXIT.ok;
}

function summarize(io: Io, r: Run): void {
  print(io, `run ${r.id}: ${r.status}${r.outcome && r.outcome !== r.status ? ` (${r.outcome})` : ''}${r.reason ? ` — ${r.reason}` : ''} · ${charge(r)}`);
  if (r.scheduledFor && r.status === 'pending' && !r.queue) print(io, `scheduled: enters the queue at ${r.scheduledFor}`);
  if (r.queue) print(io, `in queue: ${r.queue.state}, position ${r.queue.position}${r.queue.etaSeconds ? `, ~${r.queue.etaSeconds} s` : ''}`);
  for (const o of r.outputs) print(io, `  ${o.name}: ${showValue(o.value)}`);
}

function exitFor(status: string): number {
  return status === 'completed' ? EXIT.ok : EXIT.notCompleted;
}

/** Tags a 404 with the workflow id, so the one-line error names it. */
async function withWorkflow<T>(id: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw Object.assign(err as object, { workflow: id });
  }
}

function int(v: string | undefined, dflt: number): number {
  if (v === undefined) return dflt;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new UsageError(`expected a whole number, got "${v}"`);
  return n;
}
