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
}

/** The run was admitted from the queue (phase `starting`): fund it and start driving it. */
export const admittedSignal = defineSignal('admitted');
/** The run was cancelled (already committed by the cancel-run service): stop and abort running steps. */
export const cancelSignal = defineSignal('cancel');
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
  cancelRequested: boolean;
}

/** Read-only view for operators (Temporal UI → Queries → `state`). */
export const stateQuery = defineQuery<RunWorkflowView>('state');
