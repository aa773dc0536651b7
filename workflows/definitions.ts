import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import { defineQuery, defineSignal } from '@temporalio/workflow';

/**
 * The run workflow's public surface: its type name, arguments, signals and query. Imported by the
 * workflow and by the client side (src/engine/temporal), so it must stay free of anything but
 * `@temporalio/workflow` definitions (which are safe to import outside a workflow).
 */

export const RUN_WORKFLOW_TYPE = 'runWorkflow';

export interface RunWorkflowArgs {
  runId: string;
  /** The run was already admitted (its phase left `queued`) when the workflow was started. */
  admitted?: boolean;
  /** The run's Cancel-After deadline, epoch ms: a timer cancels the run then (patch `run-deadline`). */
  deadline?: number;
}

export interface RunWorkflowResult {
  runId: string;
  /** The run's status as the workflow last saw it in the database (null: the run row is gone). */
  status: string | null;
}

/** The memo every run workflow carries, so operators see whose run it is in the Temporal UI. */
export interface RunMemo {
  runId: string;
  accountHandle: string;
  workflowId: string;
  versionId: string;
  /** The catalog workflow's name and the version's label, for people reading the UI. */
  workflowName: string;
  versionLabel: string;
}

/**
 * Custom search attributes of a run's execution, so operators filter runs in the Temporal UI and CLI
 * (`temporal workflow list --query 'RunStatus="failed" AND AccountHandle="acme"'`). `WorkflowId` is
 * Temporal's own attribute (here: the run id), so the catalog workflow is `CatalogWorkflowId`. The
 * service registers them on its namespace at start (src/engine/temporal/search-attributes.ts).
 */
export const searchAttributes = {
  accountHandle: defineSearchAttributeKey('AccountHandle', SearchAttributeType.KEYWORD),
  catalogWorkflowId: defineSearchAttributeKey('CatalogWorkflowId', SearchAttributeType.KEYWORD),
  workflowVersionId: defineSearchAttributeKey('WorkflowVersionId', SearchAttributeType.KEYWORD),
  /** The run's status as the REST API shows it: pending, running, suspended, completed, failed, cancelled. */
  runStatus: defineSearchAttributeKey('RunStatus', SearchAttributeType.KEYWORD),
  /** The completed run's outcome (completed, completed_with_issues); unset otherwise. */
  runOutcome: defineSearchAttributeKey('RunOutcome', SearchAttributeType.KEYWORD),
} as const;

/** The run was admitted from the queue (phase `starting`): fund it and start driving it. */
export const admittedSignal = defineSignal('admitted');
/** The ApplicationFailure type a failed run's execution fails with (its message: the run's buyer-safe reason). */
export const RUN_FAILED_TYPE = 'RunFailed';
/** Credentials were stored for the run (supply-run-credentials): resume a wait_signal suspension. */
export const credentialsSuppliedSignal = defineSignal('credentialsSupplied');

export interface RunWorkflowView {
  runId: string;
  /** What the workflow is doing now. */
  phase: 'queued' | 'preparing' | 'running' | 'waiting_timer' | 'waiting_signal' | 'retrying' | 'ended';
  /** Step nodes whose activity is in flight. */
  runningSteps: string[];
  /** Epoch ms the workflow sleeps until (waiting_timer, retrying). */
  until: number | null;
}

/** Read-only view for operators (Temporal UI → Queries → `state`). */
export const stateQuery = defineQuery<RunWorkflowView>('state');
