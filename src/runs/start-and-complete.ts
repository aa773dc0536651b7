import { Batch } from '../db/batch.ts';
import { outsideTransaction } from '../db/statement.ts';
import type { BatchEntry, NewRunEvent } from '../domain/run-steps.ts';
import { FINISH_RUNS_IN_MEMORY } from '../sql/finish-runs-in-memory.ts';
import type { RunsDeps } from './deps.ts';
import { publishTerminal, type FencedWrite } from './fenced-write.ts';
import { terminalColumns, terminalEventData, type Finish } from './finish-run.ts';
import { batchWrite } from './record-batch.ts';
import { runMeta } from './run-state.ts';

/**
 * An admitted run the caller computed entirely in memory (`entries`: its steps and free actions) is
 * started, its steps recorded, funded, finished and settled, with its webhook outbox, in ONE statement
 * (FINISH_RUNS_IN_MEMORY), together with the other runs finishing meanwhile: one commit and one lock
 * of each account's wallet for all of them (and, when the run event bus lets it, their NOTIFY). Returns false when it cannot start here (not admitted any
 * more, a fence of the batch, or a wallet that does not cover its hold): nothing is written and
 * prepareRun decides then.
 */
export async function startAndComplete(deps: RunsDeps, runId: string, finish: Finish, entries: BatchEntry[] | null): Promise<{ completed: boolean }> {
  // Reads only what never changes (the run's version and account, the graph), cached: outside the transaction.
  const em = outsideTransaction(deps.orm);
  const write = entries?.length ? await batchWrite(em, runId, entries) : null;
  if (entries?.length && !write) return { completed: false };
  const meta = await runMeta(em, runId);
  if (!meta) return { completed: false };
  const events = [...STARTED_EVENTS, ...(write?.events ?? []), { type: `run.${finish.status}`, data: terminalEventData(finish) }];
  // When the bus would send a NOTIFY at once anyway, the statement's transaction carries it.
  const notify = deps.bus.claimNotify?.() ?? null;
  const [row] = await FINISHES.run(em, { runId, accountId: meta.accountId, write, finish, events, notify });
  if (!row || row.written !== true) return { completed: false };
  const [, outcome] = terminalColumns(finish);
  if (row.notified === true) deps.bus.notifiedBy?.(new Map([[runId, Number(row.last_sequence)]]));
  publishTerminal(deps, runId, { last: Number(row.last_sequence), webhooks: Number(row.webhooks), status: finish.status, outcome, accountId: meta.accountId });
  return { completed: true };
}

const STARTED_EVENTS: NewRunEvent[] = [
  { type: 'run.preparing', data: { status: 'pending' } },
  { type: 'run.started', data: { status: 'running' } },
];

/** One run to finish: its batch's fenced write (null: no steps), its ending and all its events. */
export interface RunToFinish {
  runId: string;
  accountId: string;
  write: FencedWrite | null;
  finish: Finish;
  events: NewRunEvent[];
  /** The channel to notify the run on in the statement's transaction, or null (the bus notifies). */
  notify: string | null;
}

/**
 * How long a settlement that finds none in flight waits for others (ms). It is work nobody waits on
 * synchronously (the caller had its 202; clients poll every 1–3 s), so runs that keep finishing commit
 * a few milliseconds' worth at a time: fewer commits and WAL flushes, and the acceptances have the
 * database to themselves in between.
 */
const SETTLEMENT_GATHER_MS = 5;

const json = (value: unknown) => JSON.stringify(value);

/** FINISH_RUNS_IN_MEMORY's arrays, from the calls' named fields (src/sql/finish-runs-in-memory.ts documents them). */
export function finishValues(calls: readonly RunToFinish[]): unknown[] {
  const column = <T>(of: (call: RunToFinish) => T) => calls.map(of);
  const events = calls.flatMap((call, i) => call.events.map((event) => ({ ord: i + 1, ...event })));
  return [
    column((c) => c.runId),
    column((c) => json(c.write?.absentResults ?? [])),
    column((c) => json(c.write?.absentTimers ?? [])),
    column((c) => c.write?.computeLimitSteps ?? null),
    column((c) => (c.write?.progress ? json(c.write.progress.results ?? {}) : null)),
    column((c) => json(c.write?.progress?.addTimers ?? {})),
    column((c) => json(c.write?.progress?.removeTimers ?? [])),
    column((c) => c.write?.compute?.steps ?? 0),
    column((c) => c.write?.compute?.extra?.toFixed() ?? '0'),
    column((c) => c.finish.status),
    column((c) => terminalColumns(c.finish)[1]),
    column((c) => terminalColumns(c.finish)[2]),
    column((c) => terminalColumns(c.finish)[3]),
    column((c) => c.finish.charge),
    events.map((e) => e.ord),
    events.map((e) => e.type),
    events.map((e) => e.nodeId ?? null),
    events.map((e) => json(e.data ?? {})),
    column((c) => c.notify),
  ];
}

/** Runs finishing meanwhile go as one statement; a run twice never shares one; accounts' wallets are locked in one order. */
const FINISHES = new Batch<RunToFinish>({
  statement: FINISH_RUNS_IN_MEMORY,
  values: finishValues,
  apartKey: (call) => call.runId,
  orderKey: (call) => call.accountId,
  gatherMs: SETTLEMENT_GATHER_MS,
});
