import type { components, operations } from './generated/api.ts';

/** Public shapes of the API, named after openapi/openapi.yaml's schemas (generated into ./generated/api.ts). */
type Schemas = components['schemas'];

export type Run = Schemas['Run'];
export type RunStatus = Schemas['PublicRunStatus'];
export type RunListItem = Schemas['RunListItem'];
export type RunListPage = Schemas['RunListPage'];
export type RunEvent = Schemas['RunEvent'];
export type RunEventsPage = Schemas['RunEventsPage'];
export type RunOutputField = Schemas['RunOutputField'];
export type AcceptedRun = Schemas['AcceptedRun'];
export type CancelRunResponse = Schemas['CancelRunResponse'];
export type RunFilter = Schemas['RunFilter'];
export type RunSetRequest = Schemas['RunSetRequest'];
export type CancelRunsResponse = Schemas['CancelRunsResponse'];
export type ReplayRunRequest = Schemas['ReplayRunRequest'];
export type ReplayRunsRequest = Schemas['ReplayRunsRequest'];
export type ReplayRunsResponse = Schemas['ReplayRunsResponse'];
export type StartRunRequest = Schemas['StartRunRequest'];
export type StartRunsItem = Schemas['StartRunFields'];
export type StartRunsResponse = Schemas['StartRunsResponse'];
export type StartRunsOutcome = Schemas['StartRunsItem'];
export type InputValue = Schemas['InputValue'];
export type WorkflowListItem = Schemas['WorkflowListItem'];
export type WorkflowListPage = Schemas['WorkflowListPage'];
export type WorkflowDetail = Schemas['WorkflowDetail'];
export type WorkflowInputField = Schemas['WorkflowInputField'];
export type WorkflowVersionsPage = Schemas['WorkflowVersionsPage'];
export type AcceptUpdateResponse = Schemas['AcceptUpdateResponse'];
export type ErrorCode = Schemas['ErrorCode'];
export type ErrorEnvelope = Schemas['Error'];
export type InputErrorDetail = Schemas['InputErrorDetail'];
export type IntegrationErrorDetail = Schemas['IntegrationErrorDetail'];
export type RunWebhookPayload = Schemas['RunWebhookPayload'];

export type ListWorkflowsQuery = NonNullable<operations['listWorkflows']['parameters']['query']>;
export type ListRunsQuery = NonNullable<operations['listRuns']['parameters']['query']>;

export const TERMINAL_STATUSES: readonly RunStatus[] = ['completed', 'failed', 'cancelled'];
export const TERMINAL_EVENT_TYPES: readonly string[] = ['run.completed', 'run.failed', 'run.cancelled'];

export function isTerminal(status: string): boolean {
  return (TERMINAL_STATUSES as readonly string[]).includes(status);
}
