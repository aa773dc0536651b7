import { notFound } from '../../domain/errors.ts';
import { isoOrNull } from '../../db/sql.ts';
import { inputSchema } from '../../domain/graph/validate.ts';
import type { Graph } from '../../domain/graph/types.ts';
import { fork, type Deps } from '../../runs/deps.ts';
import { isUuid } from '../../domain/ids.ts';
import { pageOf } from '../../domain/pagination.ts';
import { findVisibleWorkflow } from '../../catalog/workflow-access.ts';
import { query } from '../../db/statement.ts';
import { LIST_WORKFLOW_VERSIONS } from '../../sql/workflows.ts';

/** Owners see every version; others the active version and the one they are pinned to (docs/design/rules.md). */
export async function listWorkflowVersions(deps: Deps, accountId: string, workflowId: string, paging: { offset?: number; limit?: number }) {
  const page = pageOf(paging.offset, paging.limit);
  if (!isUuid(workflowId)) throw notFound('workflow');
  const em = fork(deps);
  const wf = await findVisibleWorkflow(em, accountId, workflowId);
  if (!wf) throw notFound('workflow');
  const owner = wf.ownerId === accountId;
  const rows = await query(em, LIST_WORKFLOW_VERSIONS, [workflowId, owner, wf.activeVersionId, wf.pinnedVersionId, page.limit + 1, page.offset]);
  return {
    workflowId,
    activeVersionId: wf.activeVersionId,
    pinnedVersionId: wf.pinnedVersionId,
    versions: rows.slice(0, page.limit).map((r) => ({
      id: String(r.id),
      label: String(r.label),
      createdAt: isoOrNull(r.created_at),
      isActive: r.id === wf.activeVersionId,
      isPinned: r.id === wf.pinnedVersionId,
      inputCount: inputSchema((typeof r.graph === 'string' ? JSON.parse(r.graph) : r.graph) as Graph).length,
    })),
    pagination: { ...page, hasMore: rows.length > page.limit },
  };
}
