import { query, type StatementEm } from '../db/statement.ts';
import { sum, toJson } from '../domain/money.ts';
import { BUNDLE_RUNS_LEFT, SPEND_CAP_PREVIEW } from '../sql/quote-runs.ts';
import type { Principal } from '../domain/principal.ts';
import { windowStart, type AcceptCall } from './accept-run.ts';

/**
 * `?dryRun=true` (docs/design/batch-runs.md#dryruntrue): what accepting the checked runs would cost, from
 * the same check as the real start and the acceptance's own spend-cap function; nothing is written.
 * Funding is decided at preparation (docs/design/money.md); the quote says what it would be now:
 * `owned` (the caller's own workflow), `bundle` (a bundle of that version has a run left, taken in
 * index order), `byok` (paid from the wallet, the model calls on the caller's own provider key) or
 * `wallet`.
 */

export type Funding = 'owned' | 'bundle' | 'wallet' | 'byok';

export interface RunQuote {
  workflow: string;
  version: string;
  /** The displayed run price (USD). */
  priceUsd: number;
  funding: Funding;
}

export interface Quotes {
  /** Each call's quote, in order. */
  quotes: RunQuote[];
  /** The calls (their places in `calls`) the key's spend cap would refuse. */
  overCap: Set<number>;
  /** The displayed prices of the calls the cap would let through (USD, exact). */
  totalUsd: number;
}

export async function quoteRuns(em: StatementEm, principal: Principal, calls: readonly AcceptCall[]): Promise<Quotes> {
  const left = new Map<string, number>();
  if (calls.some((c) => !c.run.access.isOwner)) {
    for (const b of await query<{ workflow_id: string; version_id: string; runs_left: number }>(em, BUNDLE_RUNS_LEFT, [principal.accountId])) {
      left.set(`${b.workflow_id}:${b.version_id}`, Number(b.runs_left));
    }
  }
  const quotes = calls.map(({ run }): RunQuote => {
    const bundle = `${run.access.row.id}:${run.versionId}`;
    let funding: Funding = run.access.row.credentialMode === 'byok' ? 'byok' : 'wallet';
    if (run.access.isOwner) funding = 'owned';
    else if ((left.get(bundle) ?? 0) > 0) {
      left.set(bundle, left.get(bundle)! - 1);
      funding = 'bundle';
    }
    return { workflow: run.access.row.id, version: run.versionId, priceUsd: toJson(run.displayedPriceUsd), funding };
  });
  const overCap = await capRefusals(em, principal, calls);
  return { quotes, overCap, totalUsd: toJson(sum(calls.filter((_, i) => !overCap.has(i)).map((c) => c.run.displayedPriceUsd))) };
}

/** The calls the key's spend cap would refuse, in index order, as the acceptance decides it. */
async function capRefusals(em: StatementEm, principal: Principal, calls: readonly AcceptCall[]): Promise<Set<number>> {
  const cap = principal.spendCap;
  if (!cap || calls.length === 0) return new Set();
  const since = windowStart(cap.window).toISOString();
  const [row] = await query<{ ords: (string | number)[] | null }>(em, SPEND_CAP_PREVIEW, [
    calls.map((_, i) => i + 1),
    calls.map(() => principal.apiKeyId),
    calls.map(() => since),
    calls.map((c) => c.run.displayedPriceUsd),
    calls.map(() => cap.usd),
    calls.map(() => principal.accountId),
    calls.map((c) => c.idempotencyKey),
  ]);
  return new Set((row?.ords ?? []).map((ord) => Number(ord) - 1));
}
