import { isTerminal } from '../domain/run-status.ts';
import { runsCancelledInBulk } from '../observability/metrics.ts';
import type { Deps } from './deps.ts';
import { commitCancellations, tellCancelled } from './cancel-run.ts';
import { parseRunSelection, selectRuns } from './run-selection.ts';

/**
 * POST /runs/cancel (docs/design/runs-in-sets.md#cancel): cancels the runs a body names by `ids` or by
 * `filter` (a page of at most 1,000, with a cursor to the next), each exactly as the single cancel
 * (src/runs/cancel-run.ts) would: one statement for the set, a terminal run never changes, no run is
 * charged. `dryRun` counts what it would do and writes nothing.
 */

export type CancelOutcome = 'cancelled' | 'already_terminal' | 'not_found';

export interface CancelRunsResult {
  dryRun: boolean;
  /** Runs the call named that the account owns. */
  matched: number;
  /** Runs this call cancelled (a dry run: would cancel). */
  cancelled: number;
  /** Runs that were terminal already (or became so before this call could cancel them). */
  alreadyTerminal: number;
  /** With `ids`: each id's outcome, in the order given. */
  results?: { id: string; outcome: CancelOutcome }[];
  /** With `filter`: the cursor to the next page, or null when this page was the last. */
  nextCursor?: string | null;
}

export async function cancelRuns(deps: Deps, accountId: string, body: unknown, opts: { dryRun?: boolean } = {}): Promise<CancelRunsResult> {
  const selection = parseRunSelection(body);
  const selected = await selectRuns(deps, accountId, selection);
  const live = selected.runs.filter((r) => !isTerminal(r.status)).map((r) => r.id);
  const dryRun = opts.dryRun === true;
  const cancelled = dryRun ? live : await commitCancellations(deps, live);
  if (!dryRun) {
    runsCancelledInBulk(cancelled.length);
    // Committed: the answer does not wait for the engines (on Temporal, one call per run).
    void tellCancelled(deps, deps.engine, cancelled);
  }
  const result: CancelRunsResult = {
    dryRun,
    matched: selected.runs.length,
    cancelled: cancelled.length,
    alreadyTerminal: selected.runs.length - cancelled.length,
  };
  if (selection.kind === 'filter') return { ...result, nextCursor: selected.nextCursor };
  const done = new Set(cancelled);
  const found = new Set(selected.runs.map((r) => r.id));
  const outcome = (id: string): CancelOutcome => (!found.has(id.toLowerCase()) ? 'not_found' : done.has(id.toLowerCase()) ? 'cancelled' : 'already_terminal');
  return { ...result, results: selection.ids.map((id) => ({ id, outcome: outcome(id) })) };
}
