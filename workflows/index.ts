/**
 * The Temporal workflows of this service (`Worker.create({ workflowsPath })` and `bundleWorkflowCode`
 * load this file). Every exported function is registered as a workflow type, so only workflows are
 * exported here.
 */
export { runWorkflow } from './run-workflow.ts';
