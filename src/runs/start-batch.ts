import { canonicalJson } from '../domain/canonical-json.ts';
import { errorBody, invalidRequest } from '../domain/errors.ts';
import { cancelAfterSeconds } from '../domain/run-deadline.ts';
import { startAfterSeconds } from '../domain/run-start.ts';
import { outsideTransaction } from '../db/statement.ts';
import { runBatchAnswered } from '../observability/metrics.ts';
import type { Principal } from '../domain/principal.ts';
import type { Deps } from './deps.ts';
import { refuseOtherBody } from './batch-key.ts';
import { pickIdempotencyKey } from './check-run.ts';
import type { AcceptedRun } from './run-views.ts';
import type { RunQuote } from './quote-runs.ts';
import { MAX_BATCH_RUNS, quoteStartRuns, startRuns, type StartRunsOptions } from './start-runs.ts';

/**
 * POST /runs/batch (docs/design/batch-runs.md): the body's `runs`, each what POST /runs takes, through the
 * one start path (start-runs.ts), answered item by item in request order. Only what concerns the whole
 * request refuses it: a body that is not `{"runs": [1–1,000 items]}`, a malformed header, a batch key
 * used with another body (409).
 */

export interface StartBatchRequest {
  /** The parsed JSON body (anything: it is checked here). */
  body: unknown;
  /** The batch's Idempotency-Key header, if any. */
  idempotencyHeader?: string;
  /** The Cancel-After header, if any: every run's. */
  cancelAfterHeader?: string;
  /** The Start-After header, if any: every run's (an item's `startAt` with it is refused). */
  startAfterHeader?: string;
}

/** An item's refusal: the envelope's `error` POST /runs answers for the same body. */
export type ItemError = ReturnType<typeof errorBody>;

export type BatchItem = { index: number; run: AcceptedRun } | { index: number; error: ItemError };

export interface BatchAnswer {
  items: BatchItem[];
  accepted: number;
  refused: number;
}

/** The batch's items, or its 400: not `{"runs": [...]}` with 1 to MAX_BATCH_RUNS items. */
export function batchRuns(body: unknown): unknown[] {
  const runs = body !== null && typeof body === 'object' && !Array.isArray(body) ? (body as Record<string, unknown>).runs : undefined;
  if (!Array.isArray(runs)) throw invalidRequest('the body must be {"runs": [...]}, an array of what POST /runs takes');
  if (runs.length === 0 || runs.length > MAX_BATCH_RUNS) {
    throw invalidRequest(`"runs" must hold 1 to ${MAX_BATCH_RUNS} items; it holds ${runs.length}`);
  }
  return runs;
}

/** A batch past the checks of the whole request: its items and what applies to each. */
export interface CheckedBatch {
  runs: unknown[];
  options: StartRunsOptions;
}

/** The checks of the whole request (its 400s, and the 409 of a batch key used with another body); nothing written. */
export async function checkBatch(deps: Deps, principal: Principal, req: StartBatchRequest): Promise<CheckedBatch> {
  const runs = batchRuns(req.body);
  const cancelAfter = cancelAfterSeconds(req.cancelAfterHeader);
  const startAfter = startAfterSeconds(req.startAfterHeader);
  const key = pickIdempotencyKey(req.idempotencyHeader, undefined);
  const batch = key === null ? null : { key, fingerprint: deps.sealer.mac(canonicalJson(runs)) };
  if (batch) await refuseOtherBody(outsideTransaction(deps.orm), deps, principal, batch, runs.length);
  return { runs, options: { cancelAfterSeconds: cancelAfter, startAfterSeconds: startAfter, batch } };
}

/** Starts a checked batch's runs, answered item by item in request order. */
export async function startBatch(deps: Deps, principal: Principal, { runs, options }: CheckedBatch): Promise<BatchAnswer> {
  const outcomes = await startRuns(deps, principal, runs, options);
  const items = outcomes.map((o): BatchItem => ('error' in o ? { index: o.index, error: errorBody(o.error) } : { index: o.index, run: o.run }));
  const refused = items.filter((i) => 'error' in i);
  runBatchAnswered(
    items.length,
    refused.map((i) => ('error' in i ? i.error.code : '')),
  );
  return { items, accepted: items.length - refused.length, refused: refused.length };
}

export type QuotedItem = { index: number; quote: RunQuote } | { index: number; error: ItemError };

export interface BatchQuote {
  items: QuotedItem[];
  /** Items that would be accepted, and refused. */
  accepted: number;
  refused: number;
  /** The displayed prices of the items that would be accepted (USD). */
  totalUsd: number;
  /** The items the key's spend cap would refuse (also answered `spend_cap_reached`). */
  overSpendCap: number[];
}

/** `?dryRun=true`: each item's quote or refusal, the total, the items past the spend cap; nothing written. */
export async function quoteBatch(deps: Deps, principal: Principal, { runs, options }: CheckedBatch): Promise<BatchQuote> {
  const { outcomes, totalUsd } = await quoteStartRuns(deps, principal, runs, options);
  const items = outcomes.map((o): QuotedItem => ('error' in o ? { index: o.index, error: errorBody(o.error) } : o));
  const refused = items.filter((i) => 'error' in i);
  const overSpendCap = refused.filter((i) => 'error' in i && i.error.code === 'spend_cap_reached').map((i) => i.index);
  return { items, accepted: items.length - refused.length, refused: refused.length, totalUsd, overSpendCap };
}
