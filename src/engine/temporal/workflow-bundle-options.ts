import { fileURLToPath } from 'node:url';
import { WORKFLOW_TRACING_INTERCEPTORS } from '../../observability/temporal-tracing.ts';

/** The workflows module the worker bundles (`workflows/index.ts`). */
export const WORKFLOWS_PATH = fileURLToPath(new URL('../../../workflows/index.ts', import.meta.url));

/** What the bundle is built from: the workflows and the tracing interceptors (always, see docs/tracing.md). */
export const WORKFLOW_BUNDLE_OPTIONS = { workflowsPath: WORKFLOWS_PATH, workflowInterceptorModules: [WORKFLOW_TRACING_INTERCEPTORS] };
