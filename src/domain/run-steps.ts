import type { Finished, FreeAction } from './graph/interpreter.ts';
import { parseFrom, readPath, renderTemplate } from './graph/template.ts';
import { isInputKind, type Graph, type GraphNode, type JsonValue, type NodeResult } from './graph/types.ts';

/**
 * The pure part of recording a run's steps: what a text.template / json.parse step computes, which
 * events and results the interpreter's free actions and a step's result become, and the compute-limit
 * charge rules (the compute limit is in money.ts). No I/O and no decimal.js, so the run driver
 * (and with it the Temporal workflow bundle) can use it: the runs module (src/runs/) writes what these functions decide.
 */

/** An event to append to a run's log (its sequence is allocated when it is written). */
export interface NewRunEvent {
  type: string;
  nodeId?: string | null;
  data?: Record<string, string>;
}

/**
 * What a driver computed in memory and has not written yet, in order: text.template / json.parse steps
 * (with their results and output chunks) and the free actions planned between them. A chain of such
 * steps costs one statement (and, before a completion, no commit of its own) instead of one each.
 * JSON-serialisable, like every argument of a run operation.
 */
export interface StepBatch {
  entries: BatchEntry[];
  /** The run's inputs and every result known when the batch ends: what the entries were computed from. */
  known: { results: Record<string, NodeResult>; inputs: Record<string, JsonValue> };
}

export type BatchEntry = { step: string; result: NodeResult; deltas: string[] } | { actions: FreeAction[] };

/** Steps whose work is a pure function of upstream values (no I/O): a driver may batch them. */
export const isInMemoryStep = (node: GraphNode | undefined): boolean => node?.kind === 'text.template' || node?.kind === 'json.parse';

/** Splits text into a few chunks (about 64 characters, at most 32, cut after a space when possible). */
export function chunkText(text: string, size = 64, maxChunks = 32): string[] {
  if (!text) return [];
  // A cut at a space keeps at least half a target, so twice the even share bounds the count.
  const target = Math.max(size, Math.ceil((2 * text.length) / maxChunks));
  const chunks: string[] = [];
  for (let i = 0; i < text.length; ) {
    let end = Math.min(text.length, i + target);
    if (end < text.length) {
      const space = text.lastIndexOf(' ', end - 1);
      if (space >= i + target / 2) end = space + 1;
      const code = text.charCodeAt(end - 1);
      if (code >= 0xd800 && code <= 0xdbff) end++; // never split a surrogate pair
    }
    chunks.push(text.slice(i, end));
    i = end;
  }
  return chunks;
}

/**
 * Upstream values for templates: completed results, then (for input nodes, which an engine may resolve
 * without recording them) the run's inputs, and for password inputs the decrypted secret.
 */
export function valueLookup(graph: Graph, results: Record<string, NodeResult>, inputs: Record<string, JsonValue>, secrets?: Map<string, string>) {
  const inputIds = new Set(graph.nodes.filter((n) => isInputKind(n.kind)).map((n) => n.id));
  return (nodeId: string): JsonValue | undefined => {
    if (secrets?.has(nodeId)) return secrets.get(nodeId)!;
    const r = results[nodeId];
    if (r) return r.status === 'completed' ? (r.value ?? null) : undefined;
    return inputIds.has(nodeId) ? (inputs[nodeId] ?? null) : undefined;
  };
}

/** text.template and json.parse: pure functions of upstream values. */
function executeSync(node: GraphNode, lookup: (nodeId: string) => JsonValue | undefined): { result: NodeResult; deltas: string[] } {
  if (node.kind === 'text.template') {
    const text = renderTemplate(typeof node.template === 'string' ? node.template : '', lookup);
    return { result: { status: 'completed', value: text }, deltas: chunkText(text) };
  }
  if (node.kind === 'json.parse') {
    const from = typeof node.from === 'string' ? parseFrom(node.from) : { node: '', path: [] };
    const source = readPath(lookup(from.node), from.path);
    if (typeof source !== 'string') {
      if (source === undefined) return { result: { status: 'failed', reason: `invalid JSON in ${node.id}` }, deltas: [] };
      return { result: { status: 'completed', value: source }, deltas: [] };
    }
    try {
      return { result: { status: 'completed', value: JSON.parse(source) as JsonValue }, deltas: [] };
    } catch {
      return { result: { status: 'failed', reason: `invalid JSON in ${node.id}` }, deltas: [] };
    }
  }
  throw new Error(`${node.kind} is not a synchronous step`);
}

/** Computes a text.template / json.parse step from known upstream results; no I/O. */
export function computeSyncStep(
  graph: Graph,
  node: GraphNode,
  results: Record<string, NodeResult>,
  inputs: Record<string, JsonValue>,
): { result: NodeResult; deltas: string[] } {
  return executeSync(node, valueLookup(graph, results, inputs));
}

export function resultEvent(nodeId: string, result: NodeResult): NewRunEvent {
  return result.status === 'completed'
    ? { type: 'node.completed', nodeId }
    : { type: 'node.failed', nodeId, data: { reason: result.status === 'failed' ? result.reason : 'failed' } };
}

/** The events of a text.template / json.parse step: started, its deltas, completed or failed. */
export function syncStepEvents(nodeId: string, result: NodeResult, deltas: string[]): NewRunEvent[] {
  return [{ type: 'node.started', nodeId }, ...deltas.map((text) => ({ type: 'node.output.delta', nodeId, data: { text } })), resultEvent(nodeId, result)];
}

export function freeActionEffects(graph: Graph, actions: FreeAction[]) {
  const kinds = new Map(graph.nodes.map((n) => [n.id, n.kind]));
  const events: NewRunEvent[] = [];
  const results: Record<string, NodeResult> = {};
  const addTimers: Record<string, number> = {};
  const removeTimers: string[] = [];
  for (const a of actions) {
    const kind = kinds.get(a.nodeId);
    switch (a.type) {
      case 'resolve':
        results[a.nodeId] = { status: 'completed', value: a.value };
        // Inputs are recorded silently; conditions and outputs are reported.
        if (kind === 'condition' || kind === 'output') events.push({ type: 'node.completed', nodeId: a.nodeId });
        break;
      case 'skip':
        results[a.nodeId] = { status: 'skipped', reason: a.reason };
        events.push({ type: 'node.skipped', nodeId: a.nodeId, data: { reason: a.reason } });
        break;
      case 'start_timer':
        addTimers[a.nodeId] = a.dueAt;
        events.push({ type: 'node.started', nodeId: a.nodeId });
        break;
      case 'fire_timer':
        results[a.nodeId] = { status: 'completed', value: null };
        removeTimers.push(a.nodeId);
        events.push({ type: 'node.completed', nodeId: a.nodeId });
        break;
    }
  }
  return { events, results, addTimers, removeTimers };
}

/** Drops actions an earlier attempt already applied (a retry after a lost reply). */
export function pendingActions(progress: { results: Record<string, NodeResult>; timers: Record<string, number> }, actions: FreeAction[]): FreeAction[] {
  return actions.filter((a) => {
    if (a.type === 'start_timer') return !(a.nodeId in progress.timers) && !(a.nodeId in progress.results);
    return !(a.nodeId in progress.results);
  });
}

/** What a finished run is charged: the price when it completed with outcome completed, else its compute. */
export function chargeFor(finished: Finished): 'full' | 'compute' {
  if (finished.status === 'completed' && finished.outcome === 'completed') return 'full';
  return 'compute';
}
