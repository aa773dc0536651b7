import { randomUUID } from 'node:crypto';
import { Batch } from '../db/batch.ts';
import { query, type StatementEm } from '../db/statement.ts';
import { ApiError } from '../domain/errors.ts';
import { timeOrderedUuid } from '../domain/ids.ts';
import type { ResolvedInputs } from '../domain/inputs.ts';
import type { RunMetadata } from '../domain/run-metadata.ts';
import { PRIORITY_CLASS, type RunFlowControl } from '../domain/run-flow-control.ts';
import { toDb } from '../domain/money.ts';
import { requestSpendCapped } from '../observability/metrics.ts';
import { currentTraceCarrier } from '../observability/tracing.ts';
import { ACCEPT_RUNS, acceptRunsValues, type AcceptedRow, type RunAcceptance } from '../sql/accept-runs.ts';
import type { Principal } from '../domain/principal.ts';
import type { Deps } from './deps.ts';
import type { WorkflowAccess } from '../catalog/workflow-access.ts';

/**
 * POST /runs's one write (src/sql/accept-runs.ts): the idempotency record, the spend-cap reservation,
 * the run, its `run.queued` event and its sealed password inputs, fenced on the workflow read the
 * request was checked against. The request was counted in its key's rate window before (counted-start.ts).
 * The acceptances of single requests that arrive while one execution is in flight go together as the
 * next (src/db/batch.ts); a batch's set is one execution of its own.
 */

export interface RunToAccept {
  runId: string;
  principal: Principal;
  access: WorkflowAccess;
  versionId: string;
  inputs: ResolvedInputs;
  /** The caller's metadata (checked: src/domain/run-metadata.ts); not part of the idempotency fingerprint. */
  metadata: RunMetadata;
  /** Its priority and concurrency key (src/domain/run-flow-control.ts); not part of the fingerprint either. */
  flow: RunFlowControl;
  /** The Cancel-After duration: the run's deadline is its start (acceptance or scheduled start) plus this, or null: none. */
  cancelAfterSeconds: number | null;
  /** A delayed start (epoch ms; src/domain/run-start.ts): the run waits in phase `scheduled` until then; null: queued at once. */
  startAt: number | null;
  /** A debounced run (debounce-runs.ts): its key and the latest start its burst may reach (epoch ms); absent: none. */
  debounce?: { key: string; untilMs: number };
  displayedPriceUsd: string;
  stepUsd: string;
  /** The run this one replays (src/runs/replay-run.ts), written by the acceptance itself; absent: none. */
  replayOf?: string;
}

/** The run to answer with (this one, or the original of a replayed key), or 'stale': the workflow changed since its read, nothing was written. */
export type Acceptance = { runId: string; replayed: boolean } | 'stale';

/** One run to accept: the checked run, its idempotency key and fingerprint, and the view token it is fenced on (null: none). */
export interface AcceptCall {
  run: RunToAccept;
  idempotencyKey: string | null;
  fingerprint: string;
  token: string | null;
}

/** Two requests with one (account, idempotency key) never share an execution: one insert cannot claim one record twice. */
const acceptances = new Batch<RunAcceptance>({
  statement: ACCEPT_RUNS,
  values: acceptRunsValues,
  apartKey: (call) => (call.idempotencyKey === null ? undefined : `${call.accountId}\u0000${call.idempotencyKey}`),
});

/**
 * Accepts a set of runs in one statement, in order (the queue's order; the spend cap is taken in it).
 * A set of one goes with the acceptances of other requests in flight (src/db/batch.ts). The calls must
 * not share an idempotency key (the caller keeps one call per key). Each call's answer: its run, 'stale',
 * or its refusal: 409 on a key reused with another request, 402 when its price would exceed the key's
 * cap (nothing is written for it then).
 */
export async function acceptRuns(em: StatementEm, deps: Deps, calls: readonly AcceptCall[]): Promise<(Acceptance | ApiError)[]> {
  const values = calls.map((c) => acceptanceOf(deps, c.run, c.idempotencyKey, c.fingerprint, c.token, null));
  const rows = (values.length === 1 ? await acceptances.run(em, values[0]) : await query(em, ACCEPT_RUNS, acceptRunsValues(values))) as (AcceptedRow & {
    ord?: number;
  })[];
  if (rows.length !== calls.length) throw new Error('POST /runs: the acceptance statement did not answer every call');
  return rows.map((row, i) => outcomeOf(row, calls[i]));
}

function outcomeOf(row: AcceptedRow, c: AcceptCall): Acceptance | ApiError {
  if (row.stale) return 'stale';
  const cap = c.run.principal.spendCap;
  if (row.over_cap && cap) {
    requestSpendCapped();
    return spendCapReached(cap);
  }
  if (row.inserted) return { runId: c.run.runId, replayed: false };
  if (c.idempotencyKey === null || !row.run_id) throw new Error('POST /runs: the acceptance statement wrote no run');
  if (row.fingerprint !== c.fingerprint) return idempotencyConflict();
  return { runId: String(row.run_id), replayed: true };
}

export const spendCapReached = (cap: NonNullable<Principal['spendCap']>) =>
  new ApiError('spend_cap_reached', `this API key's ${cap.window} spend cap of $${toDb(cap.usd)} would be exceeded by this run`);

export const idempotencyConflict = () =>
  new ApiError('idempotency_conflict', 'this idempotency key was already used with a different request; use a new key to start a new run');

/** The acceptance of run `r`, with its password inputs sealed and taken out of its public inputs. */
export function acceptanceOf(
  deps: Deps,
  r: RunToAccept,
  idempotencyKey: string | null,
  fingerprint: string,
  viewToken: string | null,
  rateLimit: number | null,
): RunAcceptance {
  const publicInputs = { ...r.inputs.values };
  const secrets: RunAcceptance['secrets'][number][] = [];
  for (const name of r.inputs.passwordIds) {
    const value = publicInputs[name];
    publicInputs[name] = null;
    if (typeof value === 'string') secrets.push({ id: randomUUID(), name, ciphertext: deps.sealer.seal(value) });
  }
  const cap = r.principal.spendCap;
  return {
    runId: r.runId,
    accountId: r.principal.accountId,
    apiKeyId: r.principal.apiKeyId,
    workflowId: r.access.row.id,
    versionId: r.versionId,
    priceUsd: r.displayedPriceUsd,
    userAccess: r.access.userAccess,
    creatorPriceUsd: r.access.creatorPriceUsd,
    stepUsd: r.stepUsd,
    computeLimitUsd: toDb(r.access.row.computeLimitUsd ?? deps.config.computeLimitUsd),
    credentialMode: r.access.row.credentialMode,
    inputsJson: JSON.stringify(publicInputs),
    engine: deps.engine.name,
    idempotencyKey,
    fingerprint,
    recordId: timeOrderedUuid(),
    capUsd: cap ? cap.usd : null,
    capSince: cap ? windowStart(cap.window).toISOString() : null,
    traceContext: currentTraceCarrier(),
    viewToken,
    rateLimit,
    metadataJson: JSON.stringify(r.metadata),
    cancelAfterSeconds: r.cancelAfterSeconds,
    startAt: r.startAt === null ? null : new Date(r.startAt).toISOString(),
    debounce: r.debounce ? { key: r.debounce.key, until: new Date(r.debounce.untilMs).toISOString() } : null,
    priority: PRIORITY_CLASS[r.flow.priority],
    concurrencyKey: r.flow.concurrencyKey,
    concurrencyLimit: r.flow.concurrencyLimit,
    replayOf: r.replayOf ?? null,
    secrets,
  };
}

export function windowStart(window: 'daily' | 'monthly' | 'lifetime', now = new Date()): Date {
  if (window === 'daily') return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()));
  if (window === 'monthly') return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
  return new Date(0);
}
