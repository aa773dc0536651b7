import { invalidRequest } from '../../domain/errors.ts';
import { isStorableText } from '../../domain/json-limits.ts';
import type { UserAccess } from '../../db/entities/index.ts';
import type { Deps } from '../../runs/deps.ts';
import { outsideTransaction } from '../../db/statement.ts';
import { pageOf, type PaginationOut } from '../../domain/pagination.ts';
import { getPricing } from '../../catalog/pricing.ts';
import { accessOf, listVisibleWorkflows } from '../../catalog/workflow-access.ts';
import { toListItem } from './workflow-views.ts';

export interface ListWorkflowsQuery {
  offset?: number;
  limit?: number;
  q?: string;
  runModel?: string;
  access?: string;
}

export async function listWorkflows(deps: Deps, accountId: string, query: ListWorkflowsQuery) {
  // `runModel`, `access` and the length of `q` were checked against the document.
  const page = pageOf(query.offset, query.limit);
  // Postgres cannot take a NUL in text: without this the search would be a 500.
  if (query.q !== undefined && !isStorableText(query.q)) throw invalidRequest('q must not contain NUL characters');
  // Two reads outside any transaction: no entity manager of its own (src/db/statement.ts, outsideTransaction).
  const em = outsideTransaction(deps.orm);
  const pricing = await getPricing(em);
  const { rows, hasMore } = await listVisibleWorkflows(em, accountId, {
    ...page,
    q: query.q || undefined,
    runModel: query.runModel as 'free' | 'per_run' | undefined,
    access: query.access as UserAccess | undefined,
  });
  const pagination: PaginationOut = { ...page, hasMore };
  return { workflows: rows.map((r) => toListItem(accessOf(r, accountId, pricing))), pagination };
}
