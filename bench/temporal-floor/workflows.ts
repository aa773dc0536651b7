import { proxyActivities } from '@temporalio/workflow';

/**
 * The Temporal floor's workflow: one no-op activity and nothing else. What a 3-step run costs on Temporal
 * is compared with this, measured against the same dev server in the same bench run (bench/temporal.ts).
 */

export interface FloorActivities {
  noop(): Promise<void>;
}

const { noop } = proxyActivities<FloorActivities>({ startToCloseTimeout: '30 seconds' });

export const FLOOR_WORKFLOW_TYPE = 'floorWorkflow';

export async function floorWorkflow(): Promise<void> {
  await noop();
}
