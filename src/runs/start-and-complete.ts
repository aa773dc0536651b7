import { Batch } from '../db/batch.ts';
import { outsideTransaction } from '../db/statement.ts';
import type { BatchEntry, NewRunEvent } from '../domain/run-steps.ts';
import { FINISH_RUNS, finishRunsValues, type RunEnding } from '../sql/finish-runs.ts';
import type { RunsDeps } from './deps.ts';
import { publishTerminal, type FencedWrite } from './fenced-write.ts';
import { finishedBy, runEnding, terminalEventData, type Finish } from './finish-run.ts';
import { batchWrite } from './record-batch.ts';
import { runMeta } from './run-state.ts';

/**
 * An admitted run the caller computed entirely in memory (`entries`: its steps and free actions) is
 * started, its steps recorded, funded, finished and settled, with its webhook outbox, in ONE statement
 * (FINISH_RUNS, the statement every run ends by), together with the other runs finishing meanwhile: one
 * commit and one lock of each account's wallet for all of them (and, when the run event bus lets it,
 * their NOTIFY). Returns false when it cannot start here (not admitted any more, a fence of the batch, or
 * a wallet that does not cover its hold): nothing is written and prepareRun decides then.
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
  const channel = deps.bus.claimNotify?.() ?? null;
  const ending = runEnding(runId, finish, { admitted: true, fundNow: true, ...writeOf(write), events, channel });
  const [row] = await FINISHES.run(em, { ending, accountId: meta.accountId });
  if (!row || row.written !== true) return { completed: false };
  if (row.notified === true) deps.bus.notifiedBy?.(new Map([[runId, Number(row.last_sequence)]]));
  // Live readers read the events back: they carry no events here.
  publishTerminal(deps, runId, { ...finishedBy(row, ending), events: undefined });
  return { completed: true };
}

const STARTED_EVENTS: NewRunEvent[] = [
  { type: 'run.preparing', data: { status: 'pending' } },
  { type: 'run.started', data: { status: 'running' } },
];

/** A batch's fenced write (src/runs/record-batch.ts) as the fences and writes of a run's ending. */
function writeOf(write: FencedWrite | null): Partial<RunEnding> {
  if (!write) return {};
  return {
    absentResults: write.absentResults ?? [],
    absentTimers: write.absentTimers ?? [],
    limitSteps: write.computeLimitSteps ?? null,
    results: write.progress ? (write.progress.results ?? {}) : null,
    addTimers: write.progress?.addTimers ?? {},
    removeTimers: write.progress?.removeTimers ?? [],
    steps: write.compute?.steps ?? 0,
    extra: write.compute?.extra?.toFixed() ?? '0',
  };
}

/** One run to end in memory, with its account (the order its wallet is locked in). */
interface InMemoryEnding {
  ending: RunEnding;
  accountId: string;
}

/**
 * How long a settlement that finds none in flight waits for others (ms). It is work nobody waits on
 * synchronously (the caller had its 202; clients poll every 1–3 s), so runs that keep finishing commit
 * a few milliseconds' worth at a time: fewer commits and WAL flushes, and the acceptances have the
 * database to themselves in between.
 */
const SETTLEMENT_GATHER_MS = 5;

/** Runs finishing meanwhile go as one statement; a run twice never shares one; accounts' wallets are locked in one order. */
const FINISHES = new Batch<InMemoryEnding>({
  statement: FINISH_RUNS,
  values: (calls) => finishRunsValues(calls.map((call) => call.ending)),
  apartKey: (call) => call.ending.runId,
  orderKey: (call) => call.accountId,
  gatherMs: SETTLEMENT_GATHER_MS,
});
