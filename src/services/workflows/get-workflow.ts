import { notFound } from '../../domain/errors.ts';
import { fork, type Deps } from '../../runs/deps.ts';
import { getPricing } from '../../catalog/pricing.ts';
import { isUuid } from '../../domain/ids.ts';
import { accessOf, findVisibleWorkflow } from '../../catalog/workflow-access.ts';
import { toDetail } from './workflow-views.ts';

export async function getWorkflow(deps: Deps, accountId: string, workflowId: string) {
  if (!isUuid(workflowId)) throw notFound('workflow');
  const em = fork(deps);
  const row = await findVisibleWorkflow(em, accountId, workflowId);
  if (!row) throw notFound('workflow');
  return toDetail(accessOf(row, accountId, await getPricing(em)), deps.baseUrl());
}
