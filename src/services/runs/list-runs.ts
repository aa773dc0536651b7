import { invalidRequest } from '../../domain/errors.ts';
import { fork, type Deps } from '../deps.ts';
import { isUuid } from '../../domain/ids.ts';
import { checkPage } from '../pagination.ts';
import { RUN_COLUMNS } from '../../sql/runs.ts';
import { mapRunRow, toRunListItem } from './run-views.ts';

export const RUN_LIST_STATUSES = ['pending', 'running', 'completed', 'failed', 'cancelled'] as const;

export interface ListRunsQuery {
  offset?: number;
  limit?: number;
  status?: string;
  workflow?: string;
}

/** The account's runs, newest first; `running` also matches suspended runs (docs/design/rules.md). */
export async function listRuns(deps: Deps, accountId: string, query: ListRunsQuery) {
  const page = checkPage(query.offset, query.limit);
  const where = ['account_id = ?'];
  const params: unknown[] = [accountId];
  if (query.status !== undefined) {
    if (!(RUN_LIST_STATUSES as readonly string[]).includes(query.status)) {
      throw invalidRequest(`status must be one of: ${RUN_LIST_STATUSES.join(', ')}`);
    }
    if (query.status === 'running') where.push(`status in ('running', 'suspended')`);
    else {
      where.push('status = ?');
      params.push(query.status);
    }
  }
  if (query.workflow !== undefined) {
    if (!isUuid(query.workflow)) throw invalidRequest('workflow must be a UUID');
    where.push('workflow_id = ?');
    params.push(query.workflow);
  }
  params.push(page.limit + 1, page.offset);
  const rows = await fork(deps).execute<Record<string, unknown>[]>(
    `select ${RUN_COLUMNS.replace('outputs, ', '')} from runs where ${where.join(' and ')}
      order by created_at desc, id desc limit ? offset ?`,
    params,
  );
  return {
    runs: rows.slice(0, page.limit).map((r) => toRunListItem(mapRunRow(r))),
    pagination: { ...page, hasMore: rows.length > page.limit },
  };
}
