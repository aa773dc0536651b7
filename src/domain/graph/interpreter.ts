import type { Graph, JsonValue, NodeResult, RunOutputField, SkipReason, StepKind } from './types.ts';

/**
 * The graph interpreter: a pure, deterministic function from (graph, run state) to what happens next.
 * No I/O, no clocks (the caller passes `now`), no randomness: the embedded engine and the Temporal
 * workflow call the same code, and Temporal replays it.
 */

export interface PlanInput {
  graph: Graph;
  /** Input values by input nodeId, defaults applied, unset optional inputs null. Password inputs are null here: their values never enter run state. */
  inputs: Record<string, JsonValue>;
  /** Results of finished nodes (completed, failed, skipped). */
  results: Record<string, NodeResult>;
  /** Delay nodes whose timer has started and not yet fired: nodeId → due time (epoch ms). */
  timers: Record<string, number>;
  /** Step nodes currently executing (started, no result yet). */
  running: string[];
  /** Current time (epoch ms), only compared with timers. */
  now: number;
}

export type Action =
  /** A free node (input, condition, output) whose value is computed here; apply it as a completed result. */
  | { type: 'resolve'; nodeId: string; value: JsonValue }
  | { type: 'skip'; nodeId: string; reason: SkipReason }
  /** A step node whose dependencies are all satisfied: execute it (an activity). */
  | { type: 'execute'; nodeId: string; kind: StepKind }
  /** A delay node that became ready: start its timer (record it in `timers`). */
  | { type: 'start_timer'; nodeId: string; dueAt: number }
  /** A started timer that is due (`now >= dueAt`): the delay node completes with value null. */
  | { type: 'fire_timer'; nodeId: string };

export type Finished = {
  status: 'completed' | 'failed';
  outcome: 'completed' | 'completed_with_issues' | null;
  outputs: RunOutputField[];
  /** Buyer-safe reason when status is failed (the first failed node's reason), else null. */
  reason: string | null;
};

export interface Plan {
  /** Everything that can happen now, in a deterministic order (graph order after the fixpoint). */
  actions: Action[];
  /** Set when `actions` is empty and the run is not finished: what it waits for. */
  waiting: null | { kind: 'timer'; until: number } | { kind: 'running' };
  /** Set when every node has a result: the run's terminal state. */
  finished: Finished | null;
}

export declare function plan(input: PlanInput): Plan;
