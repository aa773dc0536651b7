import { checkMetadata } from '../domain/run-metadata.ts';
import type { RunStatus } from '../domain/run-status.ts';
import { fork, type Deps } from './deps.ts';
import { pageOf } from '../domain/pagination.ts';
import { LIST_RUNS, LIST_RUNS_BY_CONCURRENCY_KEY, LIST_RUNS_BY_LABEL } from '../sql/runs.ts';
import { query } from '../db/statement.ts';
import { mapRunRow, toRunListItem } from './run-views.ts';
import { instant, statusesOfListStatus } from './run-filter.ts';

export interface ListRunsQuery {
  offset?: number;
  limit?: number;
  status?: string;
  workflow?: string;
  /** `metadata[KEY]=VALUE` pairs: runs whose metadata holds every one. */
  metadata?: unknown;
  /** Runs started with this concurrency key (docs/design/flow-control.md). */
  concurrencyKey?: string;
  /** Runs created at or after this instant (RFC 3339). */
  createdAfter?: string;
  /** Runs created before this instant (RFC 3339). */
  createdBefore?: string;
}

/**
 * The account's runs, newest first; `running` also matches suspended runs (docs/design/rules.md), with
 * the filters of docs/design/run-metadata.md#filters and a concurrency key's (docs/design/flow-control.md).
 */
export async function listRuns(deps: Deps, accountId: string, q: ListRunsQuery) {
  const page = pageOf(q.offset, q.limit);
  // `status` and `workflow` were checked against the document (an enumeration, a UUID).
  const statuses: RunStatus[] | null = q.status === undefined ? null : statusesOfListStatus(q.status);
  const metadata = Object.entries(checkMetadata(q.metadata, 'the metadata filter'));
  const range = [instant(q.createdAfter, 'createdAfter'), instant(q.createdBefore, 'createdBefore')];
  const values = [accountId, statuses, q.workflow ?? null, page.limit + 1, page.offset, ...range];
  const [first] = metadata;
  const pairs = Object.fromEntries(metadata);
  const rows =
    q.concurrencyKey !== undefined
      ? await query(fork(deps), LIST_RUNS_BY_CONCURRENCY_KEY, [...values, JSON.stringify({ concurrencyKey: q.concurrencyKey, metadata: pairs })])
      : first
        ? await query(fork(deps), LIST_RUNS_BY_LABEL, [...values, first[0], first[1], JSON.stringify(pairs)])
        : await query(fork(deps), LIST_RUNS, values);
  return {
    runs: rows.slice(0, page.limit).map((r) => toRunListItem(mapRunRow(r))),
    pagination: { ...page, hasMore: rows.length > page.limit },
  };
}
