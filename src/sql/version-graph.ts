import { statement } from '../db/statement.ts';
import { WorkflowVersionSchema } from '../db/entities/index.ts';

/** $1 workflow version id: the graph its runs execute (immutable; src/runs/run-state.ts caches it). */
export const VERSION_GRAPH = statement('version_graph', 'select graph from workflow_versions where id = $1', [WorkflowVersionSchema]);
