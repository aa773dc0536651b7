import type { FilterQuery } from '@mikro-orm/core';
import type { Em } from '../../db/orm.ts';
import { WorkflowSchema, WorkflowVersionSchema, type Workflow, type WorkflowVersion } from '../../db/entities/index.ts';
import { groupPages, pagesOf, pushTo, uuids, type ChildPageKey } from './pages.ts';

/**
 * Internal reads of workflows and versions through their entities. These are the catalog's facts, not a
 * caller's view: no userAccess or per-caller price (those belong to the REST caller views in
 * workflow-access.ts). A workflow is read with its runsTotal, in the same statement.
 */

export async function workflowsByIds(em: Em, ids: readonly string[]): Promise<Map<string, Workflow>> {
  const wanted = uuids(ids);
  if (!wanted.length) return new Map();
  const workflows = await em.find(WorkflowSchema, { id: { $in: wanted } }, { populate: ['runsTotal'] });
  return new Map(workflows.map((w) => [w.id, w]));
}

export interface WorkflowSearch {
  ownerHandle?: string | null;
  listing?: Workflow['listing'] | null;
  q?: string | null;
  offset: number;
  limit: number;
}

/** Every workflow (any listing), ordered by name then id like the REST list. */
export async function searchWorkflows(em: Em, f: WorkflowSearch): Promise<{ workflows: Workflow[]; hasMore: boolean }> {
  const where: FilterQuery<Workflow> = {};
  // The owner by handle: a join on accounts, in the same statement.
  if (f.ownerHandle != null) where.ownerId = { handle: f.ownerHandle } as never;
  if (f.listing != null) where.listing = f.listing;
  if (f.q) {
    const like = `%${f.q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    where.$or = [{ name: { $ilike: like } }, { description: { $ilike: like } }];
  }
  const found = await em.find(WorkflowSchema, where, {
    populate: ['runsTotal'],
    orderBy: { name: 'asc', id: 'asc' },
    limit: f.limit + 1,
    offset: f.offset,
  });
  return { workflows: found.slice(0, f.limit), hasMore: found.length > f.limit };
}

export async function versionsByIds(em: Em, ids: readonly string[]): Promise<Map<string, WorkflowVersion>> {
  const wanted = uuids(ids);
  if (!wanted.length) return new Map();
  const versions = await em.find(WorkflowVersionSchema, { id: { $in: wanted } });
  return new Map(versions.map((v) => [v.id, v]));
}

/** Pages of versions (newest first) for many workflows in one statement per offset/limit pair. */
export async function versionsForWorkflows(em: Em, keys: readonly ChildPageKey[]): Promise<Map<string, WorkflowVersion[]>> {
  const out = new Map<string, WorkflowVersion[]>();
  for (const g of groupPages(keys)) {
    if (!g.parentIds.length) continue;
    const versions = await pagesOf(em, {
      entity: WorkflowVersionSchema,
      where: { workflowId: { $in: g.parentIds } },
      partition: 'c.workflow_id',
      order: { createdAt: 'desc', id: 'desc' },
      after: g.offset,
      upTo: g.offset + g.limit,
    });
    for (const v of versions) pushTo(out, `${v.workflowId}|${g.offset}|${g.limit}`, v);
  }
  return out;
}
