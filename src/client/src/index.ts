/** @workflow-run/client: a typed client of the Workflow Run REST API (v1). Usage: docs/client.md. */
export {
  WorkflowRunClient,
  DEFAULT_BASE_URL,
  type ClientOptions,
  type StartRunOptions,
  type StartRunsOptions,
  type StartedRun,
  type WaitOptions,
} from './client.ts';
export { ApiError, ConnectionError, WaitTimeoutError } from './errors.ts';
export { RunStream, type RunStreamItem, type StreamOptions } from './stream.ts';
export { verifyWebhook, WebhookVerificationError } from './webhooks.ts';
export * from './types.ts';
export type { components, operations, paths, webhooks } from './generated/api.ts';
