import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import type { Graph } from '../../domain/graph/types.ts';
import { createdAt, money } from './columns.ts';
import { AccountSchema } from './accounts.ts';

/** Catalog workflows, their versions and their run tallies (docs/design/catalog.md). The model as a whole: ./index.ts. */

export const RUN_MODELS = ['free', 'per_run'] as const;
export const LISTINGS = ['public', 'unlisted', 'none'] as const;
export const CREDENTIAL_MODES = ['service_hosted', 'byok'] as const;

export const WorkflowSchema = defineEntity({
  name: 'Workflow',
  tableName: 'workflows',
  properties: {
    id: p.uuid().primary(),
    ownerId: p.manyToOne(AccountSchema).mapToPk().fieldName('owner_id'),
    name: p.text(),
    description: p.text().nullable(),
    serviceCode: p.string().nullable(),
    runModel: p.enum(RUN_MODELS),
    priceUsd: money().default('0'),
    listing: p.enum(LISTINGS),
    unlock: p.boolean().default(false),
    apiAccess: p.boolean().default(true),
    credentialMode: p.enum(CREDENTIAL_MODES),
    computeLimitUsd: money().nullable(),
    activeVersionId: p.uuid().nullable(),
    /** The catalog's figure; completions since are counted in WorkflowRunTally, and runsTotal adds both. */
    runsCount: p.integer().default(0),
    /** Completed runs: runsCount plus the workflow's tallies, read in the same statement as the workflow. */
    runsTotal: p
      .integer()
      .formula((columns) => `(${columns.runsCount} + coalesce((select sum(t.runs) from workflow_run_tallies t where t.workflow_id = ${columns.id}), 0))::int`)
      .lazy(),
    createdAt: createdAt(),
  },
  indexes: [{ properties: ['ownerId'] }, { properties: ['name', 'id'] }],
});
export type Workflow = InferEntity<typeof WorkflowSchema>;

/**
 * Completed runs of a workflow counted on several rows (shards) instead of `workflows.runs_count` alone,
 * so concurrent completions do not queue on the workflow's row: a completion adds one to the shard of
 * its database session. A workflow's runsCount is its runs_count (the catalog's figure) plus its tallies.
 */
export const WorkflowRunTallySchema = defineEntity({
  name: 'WorkflowRunTally',
  tableName: 'workflow_run_tallies',
  properties: {
    workflowId: p.manyToOne(WorkflowSchema).mapToPk().fieldName('workflow_id').primary().deleteRule('cascade'),
    shard: p.smallint().primary(),
    runs: p.integer().default(0),
  },
});
export type WorkflowRunTally = InferEntity<typeof WorkflowRunTallySchema>;

/** Immutable: a version's graph never changes once written. */
export const WorkflowVersionSchema = defineEntity({
  name: 'WorkflowVersion',
  tableName: 'workflow_versions',
  properties: {
    id: p.uuid().primary(),
    workflowId: p.manyToOne(WorkflowSchema).mapToPk().fieldName('workflow_id').deleteRule('cascade'),
    label: p.string(),
    graph: p.json<Graph>(),
    /** sha256 of the canonical graph JSON, so a reload can tell "same version" from "changed version". */
    graphHash: p.string().length(64),
    createdAt: createdAt(),
  },
  uniques: [{ properties: ['workflowId', 'label'] }],
  indexes: [{ properties: ['workflowId', 'createdAt'] }],
});
export type WorkflowVersion = InferEntity<typeof WorkflowVersionSchema>;
