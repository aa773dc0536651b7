import { dependencies } from './template.ts';
import type { Graph, GraphNode } from './types.ts';

/**
 * What the interpreter reads of a graph before planning (its nodes, their kinds, what each waits for),
 * made once per shared graph instead of on every plan. Pure and deterministic, like the interpreter:
 * a kept analysis is exactly what a fresh one would be, so plans never depend on it being kept.
 */

export interface GraphAnalysis {
  /** The nodes in graph order; malformed ones dropped, and for a repeated id only the first. */
  readonly nodes: readonly GraphNode[];
  /** Kind by id, of those nodes (its keys are the known ids). */
  readonly kindOf: ReadonlyMap<string, string>;
  /** What each of `nodes` waits for, by index. */
  readonly deps: readonly (readonly string[])[];
}

/**
 * Graphs deep-frozen by freezeGraph → their analysis once made. Only those: a graph that can change
 * (or is frozen only at its root) is analysed on every call, so nothing that edits a graph it built
 * can plan with a stale analysis. A WeakMap, so a graph dropped from its cache takes its analysis along.
 */
const frozen = new WeakMap<Graph, GraphAnalysis | null>();

export function analyseGraph(graph: Graph | null | undefined): GraphAnalysis {
  if (!graph || !frozen.has(graph)) return analyse(graph);
  let a = frozen.get(graph);
  if (!a) frozen.set(graph, (a = analyse(graph)));
  return a;
}

/**
 * Deep-freezes a graph that is kept and shared (one version's graph, for every run of it), so its
 * analysis can be kept with it: it cannot change under the analysis, and code that would edit it
 * throws (ES modules are strict) instead of changing every run that shares it. Returns the graph.
 */
export function freezeGraph<G extends Graph>(graph: G): G {
  if (frozen.has(graph)) return graph;
  deepFreeze(graph);
  frozen.set(graph, null); // analysed on first use: not every kept graph is planned
  return graph;
}

/** Graphs are JSON trees (read from jsonb), so no cycle to guard against. */
function deepFreeze(value: unknown): void {
  if (value === null || typeof value !== 'object') return;
  for (const v of Object.values(value)) deepFreeze(v);
  Object.freeze(value);
}

function analyse(graph: Graph | null | undefined): GraphAnalysis {
  const nodes: GraphNode[] = [];
  const kindOf = new Map<string, string>();
  for (const node of graph?.nodes ?? []) {
    if (!node || typeof node.id !== 'string' || kindOf.has(node.id)) continue;
    kindOf.set(node.id, node.kind);
    nodes.push(node);
  }
  return { nodes, kindOf, deps: nodes.map(safeDependencies) };
}

/** A node whose dependencies cannot be read waits on itself, i.e. never runs. */
function safeDependencies(node: GraphNode): string[] {
  try {
    return dependencies(node);
  } catch {
    return [node.id];
  }
}
