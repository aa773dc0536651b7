import { checkMetadata } from '../domain/run-metadata.ts';
import type { RunStatus } from '../domain/run-status.ts';
import { fork, type Deps } from './deps.ts';
import { pageOf } from '../domain/pagination.ts';
import { LIST_RUNS, LIST_RUNS_BY_CONCURRENCY_KEY, LIST_RUNS_BY_LABEL, labelOf, type RunListCall } from '../sql/runs.ts';
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
  const metadata = checkMetadata(q.metadata, 'the metadata filter');
  const call: RunListCall = {
    account_id: accountId,
    statuses,
    workflow_id: q.workflow ?? null,
    created_after: instant(q.createdAfter, 'createdAfter'),
    created_before: instant(q.createdBefore, 'createdBefore'),
    max_rows: page.limit + 1,
    skip_rows: page.offset,
    metadata,
  };
  const label = labelOf(metadata);
  const rows =
    q.concurrencyKey !== undefined
      ? await query(fork(deps), LIST_RUNS_BY_CONCURRENCY_KEY, [{ ...call, concurrency_key: q.concurrencyKey }])
      : label
        ? await query(fork(deps), LIST_RUNS_BY_LABEL, [{ ...call, ...label }])
        : await query(fork(deps), LIST_RUNS, [call]);
  return {
    runs: rows.slice(0, page.limit).map((r) => toRunListItem(mapRunRow(r))),
    pagination: { ...page, hasMore: rows.length > page.limit },
  };
}
