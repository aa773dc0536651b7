import type { Em } from '../db/orm.ts';
import type { Graph, GraphNode, JsonValue, NodeResult } from '../domain/graph/types.ts';
import { computeSyncStep, isInMemoryStep, syncStepEvents } from '../domain/run-steps.ts';
import { fork, type RunsDeps } from './deps.ts';
import { fencedWrite, publish, publishTerminal, recordResult } from './fenced-write.ts';
import { finishRun } from './finish-run.ts';
import { COMPUTE_LIMIT_REASON, isTerminal, type RunStatus } from '../domain/run-status.ts';
import { graphOf, readRun, runMeta } from './run-state.ts';
import { traceStepKind } from '../observability/trace-spans.ts';
import { timeSyncStep } from '../observability/metrics.ts';

/** computeSyncStep, timed into the step-duration metric under the node's kind. */
export function computeTimedSyncStep(
  graph: Graph,
  node: GraphNode,
  results: Record<string, NodeResult>,
  inputs: Record<string, JsonValue>,
): ReturnType<typeof computeSyncStep> {
  return timeSyncStep(node.kind, (n: GraphNode, r: Record<string, NodeResult>) => computeSyncStep(graph, n, r, inputs), node, results);
}

/**
 * Recording a step's result: a text.template / json.parse step in one fenced statement, and why a
 * fenced step write did not happen (result already there, run not running, or the compute limit, which
 * then fails the run).
 */

export interface StepArgs {
  runId: string;
  nodeId: string;
  /**
   * Optional: the results the caller already knows (the embedded engine's in-memory state, which is
   * what it recorded). Results never change once recorded, so a text.template / json.parse step can
   * render from them and skip reading the run; the write stays fenced in SQL.
   */
  known?: { results: Record<string, NodeResult>; inputs: Record<string, JsonValue> };
}

export type StepOutcome =
  /** The node's result is recorded (by this call or an earlier attempt). */
  | { type: 'recorded'; result: NodeResult }
  /** BYOK without usable credentials: the run is suspended with wait_signal; the node is not recorded. */
  | { type: 'suspended'; reason: 'wait_signal' }
  /** The step did not (or no longer may) run: the run is terminal (cancelled, compute limit…) or not running. */
  | { type: 'not_runnable'; status: RunStatus | null };

/**
 * A text.template / json.parse step computed from the results the caller knows (`args.known`), without
 * reading the run; null when the node is not such a step (the caller takes the general path).
 */
export async function recordKnownSyncStep(deps: RunsDeps, args: StepArgs, signal?: AbortSignal): Promise<StepOutcome | null> {
  const { runId, nodeId } = args;
  if (!args.known) return null;
  const em = fork(deps);
  const meta = await runMeta(em, runId);
  if (!meta) return { type: 'not_runnable', status: null };
  const graph = await graphOf(em, meta.versionId);
  const node = graph.nodes.find((n) => n.id === nodeId);
  if (!node || !isInMemoryStep(node)) return null;
  return executeSyncStep(deps, em, runId, graph, node, args.known.results, args.known.inputs, signal);
}

/**
 * text.template / json.parse: computed in memory, then node.started, the deltas, the result and the
 * step's compute in ONE statement, fenced on the run running, the node having no result and the
 * compute limit (else nothing is written and the reason is looked up).
 */
export async function executeSyncStep(
  deps: RunsDeps,
  em: Em,
  runId: string,
  graph: Graph,
  node: GraphNode,
  results: Record<string, NodeResult>,
  inputs: Record<string, JsonValue>,
  signal: AbortSignal | undefined,
): Promise<StepOutcome> {
  signal?.throwIfAborted();
  traceStepKind(node.kind);
  const nodeId = node.id;
  const { result, deltas } = computeTimedSyncStep(graph, node, results, inputs);
  const events = syncStepEvents(nodeId, result, deltas);
  const written = await fencedWrite(em, runId, {
    statuses: ['running'],
    absentResults: [nodeId],
    computeLimitSteps: 1,
    ...recordResult(nodeId, result, result.status === 'completed' ? 'step' : null),
    events,
  });
  if (written !== null) {
    publish(deps, runId, written);
    return { type: 'recorded', result };
  }
  return explainRefusal(deps, runId, nodeId);
}

/** Why a fenced step write did not happen: result already there, run not running, or the compute limit. */
export async function explainRefusal(deps: RunsDeps, runId: string, nodeId: string): Promise<StepOutcome> {
  const run = await readRun(fork(deps), runId);
  if (!run) return { type: 'not_runnable', status: null };
  const existing = run.progress.results[nodeId];
  if (existing) return { type: 'recorded', result: existing };
  if (run.status === 'running' && !run.nextStepFits) return failForComputeLimit(deps, runId, nodeId);
  return { type: 'not_runnable', status: run.status };
}

export async function failForComputeLimit(deps: RunsDeps, runId: string, nodeId: string): Promise<StepOutcome> {
  const finished = await fork(deps).transactional(async (tx) => {
    const run = await readRun(tx, runId, true);
    if (!run || isTerminal(run.status) || run.progress.results[nodeId] || run.nextStepFits) return null;
    return finishRun(tx, runId, { status: 'failed', charge: 'compute', reason: COMPUTE_LIMIT_REASON });
  });
  publishTerminal(deps, runId, finished);
  if (finished === null) return explainRefusalAfterLimit(deps, runId, nodeId);
  return { type: 'not_runnable', status: 'failed' };
}

async function explainRefusalAfterLimit(deps: RunsDeps, runId: string, nodeId: string): Promise<StepOutcome> {
  const run = await readRun(fork(deps), runId);
  if (!run) return { type: 'not_runnable', status: null };
  const existing = run.progress.results[nodeId];
  if (existing) return { type: 'recorded', result: existing };
  return { type: 'not_runnable', status: run.status };
}
