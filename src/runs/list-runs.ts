import type { RunStatus } from '../domain/run-status.ts';
import { fork, type Deps } from '../services/deps.ts';
import { pageOf } from '../services/pagination.ts';
import { LIST_RUNS } from '../sql/runs.ts';
import { query } from '../db/statement.ts';
import { mapRunRow, toRunListItem } from './run-views.ts';

export interface ListRunsQuery {
  offset?: number;
  limit?: number;
  status?: string;
  workflow?: string;
}

/** The account's runs, newest first; `running` also matches suspended runs (docs/design/rules.md). */
export async function listRuns(deps: Deps, accountId: string, q: ListRunsQuery) {
  const page = pageOf(q.offset, q.limit);
  // `status` and `workflow` were checked against the document (an enumeration, a UUID).
  const statuses: RunStatus[] | null = q.status === undefined ? null : q.status === 'running' ? ['running', 'suspended'] : [q.status as RunStatus];
  const rows = await query(fork(deps), LIST_RUNS, [accountId, statuses, q.workflow ?? null, page.limit + 1, page.offset]);
  return {
    runs: rows.slice(0, page.limit).map((r) => toRunListItem(mapRunRow(r))),
    pagination: { ...page, hasMore: rows.length > page.limit },
  };
}
