import { analyseGraph } from './analysis.ts';
import { parseFrom, readPath, renderTemplate, stringify } from './template.ts';
import { isInputKind, isStepKind } from './types.ts';
import type { ConditionNode, Graph, GraphNode, JsonValue, NodeResult, OutputNode, RunOutputField, SkipReason, StepKind } from './types.ts';

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

/**
 * What happens next for a run, given its graph and state. Works to a fixpoint: free nodes (input,
 * condition, output) are resolved, skips cascade and due timers fire within this one call, so `actions`
 * holds everything determinable now, in topological order with ties broken by graph order. Applying the
 * actions in order is always consistent (every action's dependencies are satisfied by the state plus the
 * actions before it).
 *
 * `finished` describes the state after the returned actions are applied, so the last free actions of a
 * run come together with `finished`. `actions` empty with `waiting` and `finished` both null means no
 * progress is possible (only an invalid graph: unknown references or cycles). Never throws.
 */
export function plan(input: PlanInput): Plan {
  const now = input.now;
  // Kept with the graph when it is a shared, frozen one (analysis.ts): a run plans many times.
  const { nodes, kindOf, deps } = analyseGraph(input.graph);

  // Working copies: the state as it will be once the actions emitted so far are applied.
  const results = new Map<string, NodeResult>(ownEntries(input.results));
  const timers = new Map<string, number>();
  for (const [id, dueAt] of ownEntries(input.timers)) {
    if (kindOf.get(id) !== 'delay' || results.has(id)) continue;
    timers.set(id, typeof dueAt === 'number' && Number.isFinite(dueAt) ? dueAt : now);
  }
  const running = new Set<string>();
  for (const id of Array.isArray(input.running) ? input.running : []) {
    if (kindOf.has(id) && !results.has(id)) running.add(id);
  }
  const inputs = new Map<string, JsonValue>(ownEntries(input.inputs));

  const valueOf = (nodeId: string): JsonValue | undefined => {
    const r = results.get(nodeId);
    return r?.status === 'completed' ? (r.value ?? null) : undefined;
  };

  const next = (node: GraphNode, nodeDeps: readonly string[]): Action | null => {
    const dueAt = timers.get(node.id);
    if (dueAt !== undefined) return now >= dueAt ? { type: 'fire_timer', nodeId: node.id } : null;
    if (!nodeDeps.every((d) => results.has(d))) return null;
    const reason = skipReason(node, nodeDeps, results);
    if (reason) return { type: 'skip', nodeId: node.id, reason };
    if (isInputKind(node.kind)) return { type: 'resolve', nodeId: node.id, value: inputs.get(node.id) ?? null };
    if (isStepKind(node.kind)) return { type: 'execute', nodeId: node.id, kind: node.kind };
    switch (node.kind) {
      case 'delay':
        return { type: 'start_timer', nodeId: node.id, dueAt: now + delayMs(node.seconds) };
      case 'condition':
        return { type: 'resolve', nodeId: node.id, value: evaluateCondition(node, valueOf) };
      case 'output':
        return { type: 'resolve', nodeId: node.id, value: outputValue(node, valueOf) };
      default:
        return null; // an unknown kind never runs
    }
  };

  const apply = (action: Action): void => {
    switch (action.type) {
      case 'resolve':
        results.set(action.nodeId, { status: 'completed', value: action.value });
        break;
      case 'skip':
        results.set(action.nodeId, { status: 'skipped', reason: action.reason });
        break;
      case 'execute':
        running.add(action.nodeId);
        break;
      case 'start_timer':
        timers.set(action.nodeId, action.dueAt);
        break;
      case 'fire_timer':
        timers.delete(action.nodeId);
        results.set(action.nodeId, { status: 'completed', value: null });
        break;
    }
  };

  // Repeatedly take the first node in graph order that can act: a topological order, ties by graph
  // order. Every action advances one node (at most start_timer then fire_timer), so this terminates.
  const actions: Action[] = [];
  for (let progressed = true; progressed; ) {
    progressed = false;
    for (let i = 0; i < nodes.length; i++) {
      const node = nodes[i];
      if (results.has(node.id) || running.has(node.id)) continue;
      const action = next(node, deps[i]);
      if (!action) continue;
      actions.push(action);
      apply(action);
      progressed = true;
      break;
    }
  }

  const finished = nodes.every((n) => results.has(n.id)) && running.size === 0 && timers.size === 0 ? finish(nodes, results) : null;

  let waiting: Plan['waiting'] = null;
  if (actions.length === 0 && !finished) {
    if (running.size > 0) waiting = { kind: 'running' };
    else if (timers.size > 0) waiting = { kind: 'timer', until: Math.min(...timers.values()) };
  }
  return { actions, waiting, finished };
}

function ownEntries<T>(record: Record<string, T> | undefined | null): [string, T][] {
  return record && typeof record === 'object' ? Object.entries(record) : [];
}

function delayMs(seconds: unknown): number {
  return typeof seconds === 'number' && Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : 0;
}

/** Called once every dependency has a result. */
function skipReason(node: GraphNode, nodeDeps: readonly string[], results: Map<string, NodeResult>): SkipReason | null {
  let conditionFalse = false;
  for (const d of nodeDeps) {
    const r = results.get(d)!;
    if (r.status === 'failed' || (r.status === 'skipped' && r.reason !== 'condition_false')) return 'upstream_failed';
    if (r.status === 'skipped') conditionFalse = true;
  }
  if (conditionFalse) return 'condition_false';
  if (node.when) {
    const r = results.get(node.when.node);
    // A completed value that is not the expected boolean (including a non-boolean) is no match.
    if (r?.status === 'completed' && r.value !== node.when.is) return 'condition_false';
  }
  return null;
}

function outputValue(node: OutputNode, valueOf: (nodeId: string) => JsonValue | undefined): JsonValue {
  if (typeof node.from !== 'string' || node.from === '') return null;
  const { node: source, path } = parseFrom(node.from);
  return readPath(valueOf(source), path) ?? null;
}

const DECIMAL = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;

/** A finite number written in decimal notation (surrounding whitespace allowed), else NaN. */
function toNumber(text: string): number {
  const t = text.trim();
  return DECIMAL.test(t) ? Number(t) : NaN;
}

function operandNumber(operand: JsonValue | undefined): number {
  if (typeof operand === 'number') return Number.isFinite(operand) ? operand : NaN;
  return typeof operand === 'string' ? toNumber(operand) : NaN;
}

function jsonEqual(a: JsonValue | undefined, b: JsonValue | undefined): boolean {
  if (a === b) return true;
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return false;
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => jsonEqual(x, b[i]));
  }
  const ak = Object.keys(a);
  return ak.length === Object.keys(b).length && ak.every((k) => Object.hasOwn(b, k) && jsonEqual(a[k], b[k]));
}

const isScalar = (v: JsonValue | undefined): v is string | number | boolean => typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean';

function parseArray(text: string): JsonValue[] | null {
  const t = text.trim();
  if (!t.startsWith('[')) return null;
  try {
    const parsed = JSON.parse(t) as JsonValue;
    return Array.isArray(parsed) ? parsed : null;
  } catch {
    return null;
  }
}

function textEquals(text: string, operand: JsonValue | undefined): boolean {
  if (typeof operand === 'string') return text === operand;
  const a = toNumber(text);
  const b = operandNumber(operand);
  if (Number.isFinite(a) && Number.isFinite(b)) return a === b;
  return text === stringify(operand);
}

function textContains(text: string, operand: JsonValue | undefined): boolean {
  const items = parseArray(text);
  if (items) {
    return items.some((item) => jsonEqual(item, operand ?? null) || (isScalar(item) && isScalar(operand) && stringify(item) === stringify(operand)));
  }
  return text.includes(stringify(operand));
}

function numeric(text: string, operand: JsonValue | undefined, cmp: (a: number, b: number) => boolean): boolean {
  const a = toNumber(text);
  const b = operandNumber(operand);
  return Number.isFinite(a) && Number.isFinite(b) && cmp(a, b);
}

/** The condition's `value` template rendered with the completed results, tested with `op` against `operand`. */
export function evaluateCondition(node: ConditionNode, valueOf: (nodeId: string) => JsonValue | undefined): boolean {
  const text = typeof node.value === 'string' ? renderTemplate(node.value, valueOf) : '';
  const operand = node.operand;
  switch (node.op) {
    case 'equals':
      return textEquals(text, operand);
    case 'not_equals':
      return !textEquals(text, operand);
    case 'contains':
      return textContains(text, operand);
    case 'gt':
      return numeric(text, operand, (a, b) => a > b);
    case 'gte':
      return numeric(text, operand, (a, b) => a >= b);
    case 'lt':
      return numeric(text, operand, (a, b) => a < b);
    case 'lte':
      return numeric(text, operand, (a, b) => a <= b);
    case 'is_empty':
      return text.trim() === '';
    case 'not_empty':
      return text.trim() !== '';
    default:
      return false;
  }
}

function inferType(value: JsonValue): string {
  switch (typeof value) {
    case 'string':
      return 'text';
    case 'number':
      return 'number';
    case 'boolean':
      return 'boolean';
    default:
      return 'json';
  }
}

function finish(nodes: readonly GraphNode[], results: Map<string, NodeResult>): Finished {
  const outputs: RunOutputField[] = [];
  let firstFailure: string | null = null;
  let failed = false;
  for (const node of nodes) {
    const r = results.get(node.id)!;
    if (r.status === 'failed' && !failed) {
      failed = true;
      firstFailure = typeof r.reason === 'string' ? r.reason : 'failed';
    }
    if (node.kind === 'output' && r.status === 'completed') {
      const value = r.value ?? null;
      outputs.push({ nodeId: node.id, name: node.name ?? node.id, type: node.type ?? inferType(value), value });
    }
  }
  if (!failed) return { status: 'completed', outcome: 'completed', outputs, reason: null };
  if (outputs.length > 0) return { status: 'completed', outcome: 'completed_with_issues', outputs, reason: null };
  return { status: 'failed', outcome: null, outputs, reason: firstFailure };
}

/** Actions the engine applies itself, without an activity: everything but `execute`. */
export type FreeAction = Exclude<Action, { type: 'execute' }>;

/** Applies free actions to an in-memory copy of the run state (both engines keep one between steps). */
export function applyFreeActions(results: Record<string, NodeResult>, timers: Record<string, number>, actions: FreeAction[]): void {
  for (const a of actions) {
    switch (a.type) {
      case 'resolve':
        results[a.nodeId] = { status: 'completed', value: a.value };
        break;
      case 'skip':
        results[a.nodeId] = { status: 'skipped', reason: a.reason };
        break;
      case 'start_timer':
        timers[a.nodeId] = a.dueAt;
        break;
      case 'fire_timer':
        delete timers[a.nodeId];
        results[a.nodeId] = { status: 'completed', value: null };
        break;
    }
  }
}

/** The earliest due time among started timers, or null. */
export function nextDue(timers: Record<string, number>): number | null {
  const values = Object.values(timers);
  return values.length ? Math.min(...values) : null;
}
