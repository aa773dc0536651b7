import { createHash } from 'node:crypto';
import type { Priority } from '@temporalio/common';

/**
 * A run's priority and concurrency key as Temporal's own (docs/temporal-operations.md#priority-and-fairness):
 * the service admits runs itself, in its fair order (docs/design/flow-control.md); these keep the same
 * order among the tasks of admitted runs in Temporal's task queue, where workers may lag behind.
 */

/** `runs.priority` (0 high, 1 normal, 2 low) → Temporal's priorityKey (1 first … 5 last; 3 is its default). */
const PRIORITY_KEYS = [1, 3, 5] as const;

/** Temporal limits a fairness key to 64 bytes. */
const MAX_FAIRNESS_KEY_BYTES = 64;

export interface RunFlow {
  /** `runs.priority`. */
  priority?: number;
  concurrencyKey?: string | null;
}

/**
 * The workflow start's `priority`: the class as priorityKey; a keyed run's account and key as its
 * fairnessKey (weight 1), hashed when longer than Temporal takes. A run without a key has no fairness key.
 */
export function temporalPriority(accountHandle: string, flow: RunFlow): Priority {
  const priorityKey = PRIORITY_KEYS[flow.priority ?? 1] ?? 3;
  if (!flow.concurrencyKey) return { priorityKey };
  const plain = `${accountHandle}/${flow.concurrencyKey}`;
  const fairnessKey = Buffer.byteLength(plain) <= MAX_FAIRNESS_KEY_BYTES ? plain : `sha256:${createHash('sha256').update(plain).digest('hex').slice(0, 48)}`;
  return { priorityKey, fairnessKey, fairnessWeight: 1 };
}
