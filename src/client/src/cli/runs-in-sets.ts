import type { RunFilter } from '../types.ts';
import { clientFrom, EXIT, metadataOf, type Io } from './commands.ts';
import { parseInputs, UsageError } from './inputs.ts';

/** `wr runs cancel` by filter and `wr runs replay` (POST /runs/cancel, POST /runs/{id}/replay): docs/client.md. */

const print = (io: Io, text: string) => io.stdout.write(`${text}\n`);

export interface CancelManyOpts {
  status?: string[];
  workflow?: string;
  metadata?: string[];
  since?: string;
  until?: string;
  dryRun?: boolean;
  json?: boolean;
}

/** Cancels (or, with --dry-run, counts) every run the filter matches, page after page. */
export async function runsCancelMany(io: Io, opts: CancelManyOpts): Promise<number> {
  const metadata = metadataOf(opts.metadata);
  const filter: RunFilter = {
    ...(opts.status?.length ? { status: opts.status as RunFilter['status'] } : {}),
    ...(opts.workflow ? { workflow: opts.workflow } : {}),
    ...(metadata ? { metadata } : {}),
    ...(opts.since ? { createdAfter: opts.since } : {}),
    ...(opts.until ? { createdBefore: opts.until } : {}),
  };
  if (Object.keys(filter).length === 0) throw new UsageError('give a run id, or a filter: --status, --workflow, --metadata, --since, --until');
  const client = clientFrom(io.env);
  const total = { matched: 0, cancelled: 0, alreadyTerminal: 0 };
  let cursor: string | undefined;
  do {
    const page = await client.cancelRuns({ filter, ...(cursor ? { cursor } : {}) }, { dryRun: opts.dryRun });
    total.matched += page.matched;
    total.cancelled += page.cancelled;
    total.alreadyTerminal += page.alreadyTerminal;
    cursor = page.nextCursor ?? undefined;
  } while (cursor);
  if (opts.json) return (print(io, JSON.stringify({ dryRun: Boolean(opts.dryRun), ...total }, null, 2)), EXIT.ok);
  const verb = opts.dryRun ? 'would cancel' : 'cancelled';
  print(io, `${total.matched} runs matched: ${verb} ${total.cancelled}, ${total.alreadyTerminal} already ended`);
  return EXIT.ok;
}

export interface ReplayOpts {
  input: string[];
  currentVersion?: boolean;
  metadata?: string[];
  idempotencyKey?: string;
  json?: boolean;
}

/** Starts a new run with the run's inputs (`-i` overrides them; password inputs must be given again). */
export async function runsReplay(io: Io, id: string, opts: ReplayOpts): Promise<number> {
  const client = clientFrom(io.env);
  const original = await client.getRun(id);
  if (opts.input.length && !original.workflowId) throw new UsageError(`run ${id} names no workflow to read the inputs of`);
  const inputs = opts.input.length ? parseInputs(opts.input, (await client.getWorkflow(original.workflowId!)).inputSchema) : {};
  const metadata = metadataOf(opts.metadata);
  const started = await client.replayRun(id, {
    inputs,
    ...(opts.currentVersion ? { version: 'current' as const } : {}),
    ...(metadata ? { metadata } : {}),
    ...(opts.idempotencyKey ? { idempotencyKey: opts.idempotencyKey } : {}),
  });
  if (opts.json) return (print(io, JSON.stringify(started, null, 2)), EXIT.ok);
  print(io, `run ${started.id} replays ${id}${started.replayed ? ' (already started under this key)' : ''}: ${started.statusUrl}`);
  return EXIT.ok;
}
