import { forbidden, notFound } from '../../domain/errors.ts';
import { fork, type Deps } from '../../runs/deps.ts';
import { isUuid } from '../../domain/ids.ts';
import { findVisibleWorkflow } from '../../catalog/workflow-access.ts';
import { query } from '../../db/statement.ts';
import { ACCEPT_WORKFLOW_UPDATE } from '../../sql/purchases.ts';

/** Re-pins the caller's purchase to the active version (docs/design/rules.md). Fenced on the old pin. */
export async function acceptWorkflowUpdate(deps: Deps, accountId: string, workflowId: string) {
  if (!isUuid(workflowId)) throw notFound('workflow');
  const em = fork(deps);
  const wf = await findVisibleWorkflow(em, accountId, workflowId);
  if (!wf) throw notFound('workflow');
  if (!wf.pinnedVersionId) throw forbidden('you have no purchase of this workflow to update');
  const previous = wf.pinnedVersionId;
  if (wf.activeVersionId && previous !== wf.activeVersionId) {
    await query(em, ACCEPT_WORKFLOW_UPDATE, [wf.activeVersionId, accountId, workflowId, previous]);
  }
  return {
    workflowId,
    previousVersionId: previous,
    pinnedVersionId: wf.activeVersionId ?? previous,
    activeVersionId: wf.activeVersionId,
    updateAvailable: false as const,
  };
}
