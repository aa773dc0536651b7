import type { Em } from '../db/orm.ts';
import { outsideTransaction, query } from '../db/statement.ts';
import { runInGroup } from '../db/group-commit.ts';
import type { BatchEntry, NewRunEvent } from '../domain/run-steps.ts';
import { InsufficientFundsAtSettlement, refusedAsInsufficientFunds, type SettleInput } from '../billing/settle-run.ts';
import { START_AND_FINISH, START_FINISH_AND_SETTLE } from '../sql/start-and-finish.ts';
import { fork, type RunsDeps } from './deps.ts';
import { eventArrays, publishTerminal } from './fenced-write.ts';
import { settleFinished, terminalColumns, terminalEventData, type Finish, type FinishedRun } from './finish-run.ts';
import { batchWrite } from './record-batch.ts';
import { runMeta } from './run-state.ts';
import { SETTLEMENTS_TOGETHER } from './settlements-together.ts';

/**
 * An admitted run the caller computed entirely in memory (`entries`: its steps and free actions) is
 * started, its steps recorded, funded, finished and settled in one transaction: one commit and one
 * wallet lock instead of preparation's and completion's. Returns false when it cannot start here (not
 * admitted any more, a fence of the batch, or funds insufficient for the hold): nothing is written and
 * prepareRun decides then.
 *
 * When the account has no webhook endpoint for the run's terminal event, that transaction is ONE
 * statement (START_FINISH_AND_SETTLE), sent with its BEGIN and COMMIT in one message on a Postgres
 * server. Otherwise (the statement's fence finds such an endpoint and writes nothing, or the account
 * had one last time) it is the start-and-finish statement, the webhook outbox, then the settlement sent
 * with the COMMIT.
 */
export async function startAndComplete(deps: RunsDeps, runId: string, finish: Finish, entries: BatchEntry[] | null): Promise<{ completed: boolean }> {
  // Reads only what never changes (the run's version and account, the graph), cached: outside the transaction.
  const w = entries?.length ? await batchWrite(outsideTransaction(deps.orm), runId, entries) : null;
  if (entries?.length && !w) return { completed: false };
  const params = [
    runId,
    w?.absentResults ?? [],
    w?.absentTimers ?? [],
    w?.computeLimitSteps ?? null,
    w?.progress ? JSON.stringify(w.progress.results ?? {}) : null,
    JSON.stringify(w?.progress?.addTimers ?? {}),
    w?.progress?.removeTimers ?? [],
    w?.compute?.steps ?? 0,
    w?.compute?.extra?.toFixed() ?? '0',
    ...eventArrays([...STARTED_EVENTS, ...(w?.events ?? []), { type: `run.${finish.status}`, data: terminalEventData(finish) }]),
    ...terminalColumns(finish),
    finish.charge,
  ];
  const accountId = (await runMeta(outsideTransaction(deps.orm), runId))?.accountId;
  let done: FinishedRun | null | 'hooked';
  try {
    done = accountId && hookedAccounts.has(accountId) ? 'hooked' : await startFinishAndSettle(deps, finish, params, accountId ?? runId);
    if (done === 'hooked') {
      done = await fork(deps).transactional((tx) => startAndFinish(tx, runId, finish, params));
      if (accountId && done !== null) remember(accountId, done.webhooks > 0);
    }
  } catch (error) {
    if (error instanceof NotStartedHere || error instanceof InsufficientFundsAtSettlement) return { completed: false };
    throw error;
  }
  publishTerminal(deps, runId, done);
  return { completed: done !== null };
}

const STARTED_EVENTS: NewRunEvent[] = [
  { type: 'run.preparing', data: { status: 'pending' } },
  { type: 'run.started', data: { status: 'running' } },
];

/** Rolls back a start-and-complete transaction: the run is left to prepareRun. */
class NotStartedHere extends Error {}

/**
 * Accounts whose last such run found a webhook endpoint for it: their runs go straight to the path that
 * writes the outbox, instead of trying the one statement first (its fence would stop it). Only an
 * optimisation: the fence decides, and an account leaves this set once that path wrote no outbox row.
 */
const hookedAccounts = new Set<string>();
const HOOKED_MAX = 10_000;

function remember(accountId: string, hooked: boolean): void {
  if (!hooked) {
    hookedAccounts.delete(accountId);
    return;
  }
  if (hookedAccounts.size >= HOOKED_MAX) hookedAccounts.delete(hookedAccounts.values().next().value as string);
  hookedAccounts.add(accountId);
}

/**
 * How long a settlement that finds none in flight waits for others (ms). It is work nobody waits on
 * synchronously (the caller had its 202; clients poll every 1–3 s), so runs that keep finishing commit
 * a few milliseconds' worth at a time: fewer commits and WAL flushes, and the acceptances have the
 * database to themselves in between.
 */
export const SETTLEMENT_GATHER_MS = 5;

/** The whole transaction as one statement; 'hooked' when the account has an endpoint for the terminal event (nothing written). */
async function startFinishAndSettle(deps: RunsDeps, finish: Finish, params: unknown[], accountId: string): Promise<FinishedRun | null | 'hooked'> {
  // Committed together with the runs that are ready meanwhile (src/db/group-commit.ts): one commit for
  // all of them, and their account's wallet row locked once instead of once per run until its commit.
  const [row] = await refusedAsInsufficientFunds(() =>
    runInGroup(outsideTransaction(deps.orm), START_FINISH_AND_SETTLE, params, accountId, undefined, SETTLEMENTS_TOGETHER),
  );
  if (!row) return null;
  if (row.hooked === true) {
    remember(String(row.account_id), true);
    return 'hooked';
  }
  const [, outcome] = terminalColumns(finish);
  return { last: Number(row.last_sequence), webhooks: 0, status: finish.status, outcome, accountId: String(row.account_id) };
}

/**
 * Started here: the start, the batch, the funding mark (a bundle pays now, else the wallet hold is
 * recorded for the settlement to take) and the terminal state in ONE statement (START_AND_FINISH), so
 * the run's row is written once; then the webhook outbox and the settlement, the last statement, sent
 * with the COMMIT, so the account's wallet row is locked for one statement and the commit.
 */
async function startAndFinish(tx: Em, runId: string, finish: Finish, params: unknown[]): Promise<FinishedRun | null> {
  const [row] = await query(tx, START_AND_FINISH, params);
  if (!row) throw new NotStartedHere();
  const settle: SettleInput = {
    id: runId,
    accountId: String(row.account_id),
    funding: String(row.funding),
    bundleId: row.bundle_id === null ? null : String(row.bundle_id),
    holdUsd: String(row.hold_usd),
  };
  return settleFinished(tx, runId, finish, row, settle, String(row.workflow_id), {
    holdAtSettlement: settle.funding === 'wallet',
    commit: true,
  });
}
