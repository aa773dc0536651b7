import { invalidRequest } from '../../domain/errors.ts';
import { LIST_STATUSES, type RunStatus } from '../../domain/run-status.ts';
import { fork, type Deps } from '../deps.ts';
import { isUuid } from '../../domain/ids.ts';
import { checkPage } from '../pagination.ts';
import { LIST_RUNS } from '../../sql/runs.ts';
import { query } from '../../db/statement.ts';
import { mapRunRow, toRunListItem } from './run-views.ts';

export interface ListRunsQuery {
  offset?: number;
  limit?: number;
  status?: string;
  workflow?: string;
}

/** The account's runs, newest first; `running` also matches suspended runs (docs/design/rules.md). */
export async function listRuns(deps: Deps, accountId: string, q: ListRunsQuery) {
  const page = checkPage(q.offset, q.limit);
  let statuses: RunStatus[] | null = null;
  if (q.status !== undefined) {
    if (!(LIST_STATUSES as readonly string[]).includes(q.status)) {
      throw invalidRequest(`status must be one of: ${LIST_STATUSES.join(', ')}`);
    }
    statuses = q.status === 'running' ? ['running', 'suspended'] : [q.status as RunStatus];
  }
  if (q.workflow !== undefined && !isUuid(q.workflow)) throw invalidRequest('workflow must be a UUID');
  const rows = await query(fork(deps), LIST_RUNS, [accountId, statuses, q.workflow ?? null, page.limit + 1, page.offset]);
  return {
    runs: rows.slice(0, page.limit).map((r) => toRunListItem(mapRunRow(r))),
    pagination: { ...page, hasMore: rows.length > page.limit },
  };
}
