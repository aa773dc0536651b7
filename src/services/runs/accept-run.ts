import { randomUUID } from 'node:crypto';
import { runInGroup, type GroupReceipt } from '../../db/group-commit.ts';
import type { StatementTxEm } from '../../db/statement.ts';
import { ApiError } from '../../domain/errors.ts';
import { timeOrderedUuid } from '../../domain/ids.ts';
import type { ResolvedInputs } from '../../domain/inputs.ts';
import { toDb } from '../../domain/money.ts';
import { requestSpendCapped } from '../../observability/metrics.ts';
import { currentTraceCarrier } from '../../observability/tracing.ts';
import { acceptRunFor } from '../../sql/accept-run.ts';
import type { Principal } from '../auth/authenticate-key.ts';
import type { Deps } from '../deps.ts';
import type { WorkflowAccess } from '../workflows/workflow-access.ts';
import type { HitRow } from '../../sql/rate-windows.ts';
import type { RequestRate } from './rate-limiter.ts';
import { ACCEPTANCES_TOGETHER } from './acceptances-together.ts';

/**
 * POST /runs's one write (src/sql/accept-run.ts): the idempotency record, the spend-cap reservation,
 * the run, its `run.queued` event and its sealed password inputs, fenced on the workflow read the
 * request was checked against. When the request is still to be counted in its key's rate window and
 * the window is a database row, the same statement counts it, and it is committed together with the
 * other acceptances and runs that are ready meanwhile (src/db/group-commit.ts;
 * docs/design/rules.md#rate-limit).
 */

export interface RunToAccept {
  runId: string;
  principal: Principal;
  access: WorkflowAccess;
  versionId: string;
  inputs: ResolvedInputs;
  displayedPriceUsd: string;
  stepUsd: string;
}

/**
 * The run to answer with (this one, or the original of a replayed key), or 'stale': the workflow changed
 * since its read, nothing was written. `admissionRan`: the engine's admission round ran in the same
 * transaction (src/engine/embedded/admission-in-acceptance.ts).
 */
export type Acceptance = { runId: string; replayed: boolean; admissionRan: boolean } | 'stale';

/** The SQLSTATE `wr_reserve_spend_cap` raises when the run's price does not fit the key's cap. */
const CAP_REACHED = 'WR002';

/** ACCEPT_RUN's row: the acceptance, then its hit's columns (null when it did not count the request). */
type Row = { run_id: string | null; fingerprint: string | null; inserted: boolean; stale: boolean } & HitRow;

/**
 * Accepts run `r`. `token`: the view token of the workflow read (null fences nothing). `rate`: the
 * request's rate count, taken here unless the workflow read took it; throws its 429 when the window is full.
 * Throws 409 on a key reused with another request and 402 when the run's displayed price would exceed
 * the key's cap (nothing is written then).
 */
export async function acceptRun(
  em: StatementTxEm,
  deps: Deps,
  r: RunToAccept,
  idempotencyKey: string | null,
  fingerprint: string,
  token: string | null,
  rate: RequestRate | undefined,
): Promise<Acceptance> {
  const cap = r.principal.spendCap;
  const { values, sealed } = acceptValues(deps, r, idempotencyKey, fingerprint);
  const limit = rate ? await rate.statementLimit() : null;
  let row: Row | undefined;
  const receipt: GroupReceipt = { covered: false };
  try {
    const s = acceptRunFor({ hit: limit !== null, cap: Boolean(cap), secrets: sealed > 0 });
    [row] = await runInGroup<Row>(em, s, [...values, token, limit], r.principal.apiKeyId, receipt, ACCEPTANCES_TOGETHER);
  } catch (err) {
    if (cap && sqlState(err) === CAP_REACHED) {
      // The statement, its count included, was undone; the request reached the limiter, so it counts.
      if (limit !== null) await rate!.count();
      requestSpendCapped();
      throw new ApiError('spend_cap_reached', `this API key's ${cap.window} spend cap of $${toDb(cap.usd)} would be exceeded by this run`);
    }
    throw err;
  }
  if (!row) throw new Error('POST /runs: the acceptance statement returned no row');
  // Throws the 429 when the window was full (then nothing was written).
  if (limit !== null) rate!.folded(row);
  if (row.stale) return 'stale';
  if (row.inserted) return { runId: r.runId, replayed: false, admissionRan: receipt.covered };
  if (idempotencyKey === null || !row.run_id) throw new Error('POST /runs: the acceptance statement wrote no run');
  if (row.fingerprint !== fingerprint) {
    throw new ApiError('idempotency_conflict', 'this idempotency key was already used with a different request; use a new key to start a new run');
  }
  return { runId: String(row.run_id), replayed: true, admissionRan: receipt.covered };
}

/** ACCEPT_RUN's parameters $1–$22 (src/sql/accept-run.ts), and how many password inputs were sealed here. */
function acceptValues(deps: Deps, r: RunToAccept, idempotencyKey: string | null, fingerprint: string): { values: unknown[]; sealed: number } {
  const publicInputs = { ...r.inputs.values };
  const secretIds: string[] = [];
  const secretNames: string[] = [];
  const ciphertexts: string[] = [];
  for (const id of r.inputs.passwordIds) {
    const value = publicInputs[id];
    publicInputs[id] = null;
    if (typeof value === 'string') {
      secretIds.push(randomUUID());
      secretNames.push(id);
      ciphertexts.push(deps.sealer.seal(value));
    }
  }
  const cap = r.principal.spendCap;
  const computeLimit = r.access.row.computeLimitUsd ?? deps.config.computeLimitUsd;
  const values = [
    r.runId,
    r.principal.accountId,
    r.principal.apiKeyId,
    r.access.row.id,
    r.versionId,
    r.displayedPriceUsd,
    r.access.userAccess,
    r.access.creatorPriceUsd,
    r.stepUsd,
    toDb(computeLimit),
    r.access.row.credentialMode,
    JSON.stringify(publicInputs),
    deps.engine.name,
    idempotencyKey,
    fingerprint,
    timeOrderedUuid(),
    cap ? windowStart(cap.window).toISOString() : null,
    cap ? cap.usd : null,
    secretIds,
    secretNames,
    ciphertexts,
    currentTraceCarrier(),
  ];
  return { values, sealed: secretIds.length };
}

export function windowStart(window: 'daily' | 'monthly' | 'lifetime', now = new Date()): Date {
  if (window === 'daily') return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()));
  if (window === 'monthly') return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
  return new Date(0);
}

/** The SQLSTATE of a database error, through MikroORM's wrapping (the driver error is its cause or itself). */
function sqlState(err: unknown): string | undefined {
  for (let e = err as { code?: unknown; sqlState?: unknown; cause?: unknown } | undefined, i = 0; e && i < 4; e = e.cause as typeof e, i++) {
    if (typeof e.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code)) return e.code;
    if (typeof e.sqlState === 'string') return e.sqlState;
  }
  return undefined;
}
