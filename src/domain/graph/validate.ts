import { parseFrom, templateFields, templateRefs } from './template.ts';
import {
  CONDITION_OPS,
  NODE_KINDS,
  PROVIDERS,
  inputType,
  isInputKind,
  isStepKind,
  type Graph,
  type GraphNode,
  type InputKind,
  type Provider,
} from './types.ts';

/**
 * Static checks of a workflow graph (docs/design/graph-language.md), run at catalog load so a bad graph never
 * reaches the engine. Pure and Node-free: the interpreter side (Temporal sandbox) may import it too.
 *
 * `validateGraph(graph, path)` returns every problem found as `<path>.<field>: <message>`, e.g.
 * `workflows[2].versions[0].graph.nodes[3].kind: unknown kind "llm.chatt"`; an empty array means the
 * value is a valid `Graph`.
 *
 * Decisions beyond the node table of docs/design/graph-language.md (all reported as errors):
 * - unknown fields on the graph or on a node (typos like `promt` would otherwise be silently ignored);
 * - a graph needs at least one node;
 * - `options` only on `input.dropdown` (non-empty, distinct values); a dropdown `defaultValue` must be
 *   one of the option values, a number `defaultValue` must be numeric, a json `defaultValue` must parse;
 * - `condition.operand` is required for every op except `is_empty` / `not_empty`, and must be a number
 *   (or numeric string) for `gt`, `gte`, `lt`, `lte`;
 * - `http.request.method` is one of GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS (any case);
 * - `from` is `nodeId` or `nodeId.path.to.value`.
 */

export const NODE_ID = /^[A-Za-z0-9_-]+$/;
const FROM = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/;
export const HTTP_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'] as const;

const COMMON_FIELDS = ['id', 'kind', 'name', 'after', 'when', 'integration'];
const KIND_FIELDS: Record<string, string[]> = {
  input: ['description', 'required', 'placeholder', 'defaultValue', 'options'],
  'text.template': ['template'],
  'llm.chat': ['provider', 'model', 'prompt', 'system'],
  delay: ['seconds'],
  condition: ['value', 'op', 'operand'],
  'json.parse': ['from'],
  'http.request': ['method', 'url', 'headers', 'body'],
  output: ['from', 'name', 'type'],
};
/** Kinds that must never see a password input's value (docs/design/graph-language.md, "Passwords"). */
const PASSWORD_FORBIDDEN = new Set(['text.template', 'output', 'condition', 'json.parse']);

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const q = (s: string) => JSON.stringify(s);
const list = (xs: readonly string[]) => xs.join(', ');

export function validateGraph(graph: unknown, path: string): string[] {
  const errors: string[] = [];
  const err = (at: string, message: string) => errors.push(`${at}: ${message}`);

  if (!isObj(graph)) {
    err(path, 'must be an object with a "nodes" array');
    return errors;
  }
  for (const key of Object.keys(graph)) if (key !== 'nodes') err(`${path}.${key}`, 'unknown field');
  const nodes = graph.nodes;
  if (!Array.isArray(nodes)) {
    err(`${path}.nodes`, nodes === undefined ? 'is required' : 'must be an array of nodes');
    return errors;
  }
  if (nodes.length === 0) err(`${path}.nodes`, 'must contain at least one node');

  // Pass 1: shape of every node; collect ids and kinds of well-formed ids.
  const byId = new Map<string, { index: number; kind: unknown }>();
  nodes.forEach((node, i) => {
    const at = `${path}.nodes[${i}]`;
    if (!isObj(node)) {
      err(at, 'must be an object');
      return;
    }
    checkNodeShape(node, at, err);
    if (typeof node.id === 'string' && NODE_ID.test(node.id)) {
      const first = byId.get(node.id);
      if (first) err(`${at}.id`, `duplicate id ${q(node.id)} (also nodes[${first.index}])`);
      else byId.set(node.id, { index: i, kind: node.kind });
    }
  });

  // Pass 2: references, password use and the dependency edges.
  const edges = new Map<string, string[]>();
  nodes.forEach((node, i) => {
    if (!isObj(node)) return;
    const at = `${path}.nodes[${i}]`;
    const deps = new Set<string>();
    const ref = (field: string, target: string, context = '') => {
      const found = byId.get(target);
      if (!found) {
        err(`${at}.${field}`, `unknown node ${q(target)}${context}`);
        return false;
      }
      deps.add(target);
      return true;
    };
    const valueRef = (field: string, target: string, context = '') => {
      if (!ref(field, target, context)) return;
      if (byId.get(target)!.kind === 'input.password' && typeof node.kind === 'string' && PASSWORD_FORBIDDEN.has(node.kind)) {
        err(`${at}.${field}`, `password input ${q(target)} cannot be used by ${node.kind}; password values may only be used by http.request and llm.chat`);
      }
    };

    if (Array.isArray(node.after)) {
      node.after.forEach((a, j) => {
        if (typeof a === 'string') ref(`after[${j}]`, a);
      });
    }
    if (isObj(node.when) && typeof node.when.node === 'string') {
      if (ref('when.node', node.when.node) && byId.get(node.when.node)!.kind !== 'condition') {
        err(`${at}.when.node`, `${q(node.when.node)} is not a condition node`);
      }
    }
    if ((node.kind === 'json.parse' || node.kind === 'output') && typeof node.from === 'string' && FROM.test(node.from)) {
      valueRef('from', parseFrom(node.from).node);
    }
    for (const [field, template] of Object.entries(safeTemplateFields(node))) {
      for (const r of templateRefs(template)) valueRef(field, r.node, ` in {{${[r.node, ...r.path].join('.')}}}`);
    }
    if (typeof node.id === 'string' && byId.get(node.id)?.index === i) edges.set(node.id, [...deps]);
  });

  for (const cycle of findCycles(edges)) err(`${path}.nodes`, `cycle ${cycle.join(' -> ')}`);
  return errors;
}

function checkNodeShape(node: Obj, at: string, err: (at: string, message: string) => void): void {
  const str = (field: string, opts: { required?: boolean; nonEmpty?: boolean } = {}) => {
    const v = node[field];
    if (v === undefined) {
      if (opts.required) err(`${at}.${field}`, 'is required');
      return;
    }
    if (typeof v !== 'string') err(`${at}.${field}`, 'must be a string');
    else if (opts.nonEmpty && v.trim() === '') err(`${at}.${field}`, 'must not be empty');
  };
  const bool = (field: string, value: unknown, label = field) => {
    if (value !== undefined && typeof value !== 'boolean') err(`${at}.${label}`, 'must be a boolean');
  };

  // id and kind
  if (node.id === undefined) err(`${at}.id`, 'is required');
  else if (typeof node.id !== 'string') err(`${at}.id`, 'must be a string');
  else if (!NODE_ID.test(node.id)) err(`${at}.id`, `${q(node.id)} may contain only letters, digits, "_" and "-"`);
  const kind = node.kind;
  let known = false;
  if (kind === undefined) err(`${at}.kind`, 'is required');
  else if (typeof kind !== 'string') err(`${at}.kind`, 'must be a string');
  else if (!(NODE_KINDS as readonly string[]).includes(kind)) {
    err(`${at}.kind`, `unknown kind ${q(kind)}; expected one of ${list(NODE_KINDS)}`);
  } else known = true;

  // fields every node may carry
  str('name', { nonEmpty: true });
  if (node.after !== undefined) {
    if (!Array.isArray(node.after)) err(`${at}.after`, 'must be an array of node ids');
    else node.after.forEach((a, j) => typeof a !== 'string' && err(`${at}.after[${j}]`, 'must be a node id string'));
  }
  if (node.when !== undefined) {
    if (!isObj(node.when)) err(`${at}.when`, 'must be an object { node, is }');
    else {
      for (const k of Object.keys(node.when)) if (k !== 'node' && k !== 'is') err(`${at}.when.${k}`, 'unknown field');
      if (typeof node.when.node !== 'string') err(`${at}.when.node`, node.when.node === undefined ? 'is required' : 'must be a node id string');
      if (typeof node.when.is !== 'boolean') err(`${at}.when.is`, node.when.is === undefined ? 'is required' : 'must be a boolean');
    }
  }
  if (node.integration !== undefined) {
    const integ = node.integration;
    if (!isObj(integ)) err(`${at}.integration`, 'must be an object { provider, name, makesChanges }');
    else {
      for (const k of Object.keys(integ)) if (!['provider', 'name', 'makesChanges'].includes(k)) err(`${at}.integration.${k}`, 'unknown field');
      for (const k of ['provider', 'name']) {
        const v = integ[k];
        if (v === undefined) err(`${at}.integration.${k}`, 'is required');
        else if (typeof v !== 'string' || v.trim() === '') err(`${at}.integration.${k}`, 'must be a non-empty string');
      }
      if (integ.makesChanges === undefined) err(`${at}.integration.makesChanges`, 'is required');
      else bool('makesChanges', integ.makesChanges, 'integration.makesChanges');
    }
  }
  if (!known) return;

  const group = isInputKind(kind as string) ? 'input' : (kind as string);
  const allowed = new Set([...COMMON_FIELDS, ...KIND_FIELDS[group]]);
  for (const key of Object.keys(node)) if (!allowed.has(key)) err(`${at}.${key}`, `unknown field for kind ${kind as string}`);

  switch (group) {
    case 'input':
      checkInput(node, kind as InputKind, at, err, str, bool);
      break;
    case 'text.template':
      str('template', { required: true });
      break;
    case 'llm.chat':
      if (node.provider === undefined) err(`${at}.provider`, 'is required');
      else if (typeof node.provider !== 'string' || !(PROVIDERS as readonly string[]).includes(node.provider)) {
        err(`${at}.provider`, `unknown provider ${q(String(node.provider))}; expected one of ${list(PROVIDERS)}`);
      }
      str('model', { required: true, nonEmpty: true });
      str('prompt', { required: true, nonEmpty: true });
      str('system');
      break;
    case 'delay': {
      const s = node.seconds;
      if (s === undefined) err(`${at}.seconds`, 'is required');
      else if (typeof s !== 'number' || !Number.isFinite(s)) err(`${at}.seconds`, 'must be a number');
      else if (s < 0) err(`${at}.seconds`, 'must be >= 0');
      break;
    }
    case 'condition': {
      str('value', { required: true });
      const op = node.op;
      if (op === undefined) err(`${at}.op`, 'is required');
      else if (typeof op !== 'string' || !(CONDITION_OPS as readonly string[]).includes(op)) {
        err(`${at}.op`, `unknown op ${q(String(op))}; expected one of ${list(CONDITION_OPS)}`);
      } else if (op !== 'is_empty' && op !== 'not_empty') {
        if (node.operand === undefined) err(`${at}.operand`, `is required for op ${op}`);
        else if (['gt', 'gte', 'lt', 'lte'].includes(op) && !isNumeric(node.operand)) {
          err(`${at}.operand`, `must be a number for op ${op}`);
        }
      }
      break;
    }
    case 'json.parse':
    case 'output':
      str('from', { required: true });
      if (typeof node.from === 'string' && !FROM.test(node.from)) {
        err(`${at}.from`, `${q(node.from)} must be a node id, optionally followed by .path.into.value`);
      }
      if (group === 'output') {
        str('name', { nonEmpty: true });
        str('type', { nonEmpty: true });
      }
      break;
    case 'http.request':
      str('method');
      if (typeof node.method === 'string' && !(HTTP_METHODS as readonly string[]).includes(node.method.toUpperCase())) {
        err(`${at}.method`, `unknown method ${q(node.method)}; expected one of ${list(HTTP_METHODS)}`);
      }
      str('url', { required: true, nonEmpty: true });
      if (node.headers !== undefined) {
        if (!isObj(node.headers)) err(`${at}.headers`, 'must be a map of header names to string values');
        else {
          for (const [k, v] of Object.entries(node.headers)) {
            if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(k)) err(`${at}.headers.${k}`, 'is not a valid header name');
            if (typeof v !== 'string') err(`${at}.headers.${k}`, 'must be a string');
          }
        }
      }
      str('body');
      break;
  }
}

function checkInput(
  node: Obj,
  kind: InputKind,
  at: string,
  err: (at: string, message: string) => void,
  str: (field: string, opts?: { required?: boolean; nonEmpty?: boolean }) => void,
  bool: (field: string, value: unknown) => void,
): void {
  str('description');
  str('placeholder');
  str('defaultValue');
  bool('required', node.required);
  const def = typeof node.defaultValue === 'string' ? node.defaultValue : undefined;
  if (kind === 'input.dropdown') {
    const options = node.options;
    if (options === undefined) err(`${at}.options`, 'is required for input.dropdown');
    else if (!Array.isArray(options) || options.length === 0) err(`${at}.options`, 'must be a non-empty array of { label, value }');
    else {
      const seen = new Set<string>();
      options.forEach((o, j) => {
        const oat = `${at}.options[${j}]`;
        if (!isObj(o)) return err(oat, 'must be an object { label, value }');
        for (const k of Object.keys(o)) if (k !== 'label' && k !== 'value') err(`${oat}.${k}`, 'unknown field');
        for (const k of ['label', 'value']) {
          if (o[k] === undefined) err(`${oat}.${k}`, 'is required');
          else if (typeof o[k] !== 'string') err(`${oat}.${k}`, 'must be a string');
        }
        if (typeof o.value === 'string') {
          if (seen.has(o.value)) err(`${oat}.value`, `duplicate option value ${q(o.value)}`);
          seen.add(o.value);
        }
      });
      if (def !== undefined && !seen.has(def)) err(`${at}.defaultValue`, `${q(def)} is not one of the option values`);
    }
  } else if (node.options !== undefined) {
    err(`${at}.options`, 'is only allowed on input.dropdown');
  }
  if (def !== undefined && kind === 'input.number' && !isNumeric(def)) err(`${at}.defaultValue`, 'must be a number');
  if (def !== undefined && kind === 'input.json') {
    try {
      JSON.parse(def);
    } catch {
      err(`${at}.defaultValue`, 'must be valid JSON');
    }
  }
  if (def !== undefined && kind === 'input.password') err(`${at}.defaultValue`, 'is not allowed on a password input');
}

function isNumeric(v: unknown): boolean {
  if (typeof v === 'number') return Number.isFinite(v);
  return typeof v === 'string' && v.trim() !== '' && Number.isFinite(Number(v));
}

/** templateFields() on a node whose template fields may not be strings yet (shape errors reported elsewhere). */
function safeTemplateFields(node: Obj): Record<string, string> {
  const out: Record<string, string> = {};
  const candidate: Obj = { ...node };
  for (const k of ['template', 'prompt', 'system', 'value', 'url', 'body']) if (typeof candidate[k] !== 'string') delete candidate[k];
  if (isObj(candidate.headers)) {
    candidate.headers = Object.fromEntries(Object.entries(candidate.headers).filter(([, v]) => typeof v === 'string'));
  } else delete candidate.headers;
  if (typeof candidate.kind !== 'string') return out;
  let fields: Record<string, string>;
  try {
    fields = templateFields(candidate as unknown as GraphNode);
  } catch {
    return out;
  }
  for (const [k, v] of Object.entries(fields)) if (typeof v === 'string') out[k] = v;
  return out;
}

/** Every elementary cycle found by a DFS, each named once as `a -> b -> a` (in dependency order). */
function findCycles(edges: Map<string, string[]>): string[][] {
  const state = new Map<string, 'visiting' | 'done'>();
  const stack: string[] = [];
  const cycles: string[][] = [];
  const seen = new Set<string>();
  const visit = (id: string) => {
    state.set(id, 'visiting');
    stack.push(id);
    for (const dep of edges.get(id) ?? []) {
      if (!edges.has(dep)) continue;
      const s = state.get(dep);
      if (s === 'visiting') {
        // stack holds dependents first: id depends on dep; report as "dep -> ... -> id -> dep" in run order
        const loop = stack.slice(stack.indexOf(dep));
        const ordered = [...loop].reverse();
        const key = [...ordered].sort().join(',');
        if (!seen.has(key)) {
          seen.add(key);
          cycles.push([...ordered, ordered[0]]);
        }
      } else if (s === undefined) visit(dep);
    }
    stack.pop();
    state.set(id, 'done');
  };
  for (const id of edges.keys()) if (!state.has(id)) visit(id);
  return cycles;
}

/** Distinct providers of the graph's llm.chat nodes, in PROVIDERS order (`requiredProviders`). */
export function computeRequiredProviders(graph: Graph): Provider[] {
  const used = new Set<string>();
  for (const n of graph.nodes) if (n.kind === 'llm.chat') used.add(n.provider);
  return PROVIDERS.filter((p) => used.has(p));
}

/** Nodes billed as a step when executed (docs/design/money.md): text.template, llm.chat, json.parse, http.request. */
export function countStepNodes(graph: Graph): number {
  return graph.nodes.filter((n) => isStepKind(n.kind)).length;
}

export type WorkflowInputType = 'text' | 'password' | 'number' | 'textarea' | 'url' | 'file' | 'json' | 'dropdown';

/** The spec's WorkflowInputField; optional fields are present only when the node sets them. */
export interface WorkflowInputField {
  nodeId: string;
  name: string;
  type: WorkflowInputType;
  specId: InputKind;
  description?: string;
  required?: boolean;
  placeholder?: string;
  defaultValue?: string;
  options?: { label: string; value: string }[];
}

/** The published inputSchema: one field per input node, in graph order. */
export function inputSchema(graph: Graph): WorkflowInputField[] {
  const fields: WorkflowInputField[] = [];
  for (const n of graph.nodes) {
    if (!isInputKind(n.kind)) continue;
    const node = n as Extract<GraphNode, { kind: InputKind }>;
    const field: WorkflowInputField = {
      nodeId: node.id,
      name: node.name ?? node.id,
      type: inputType(node.kind) as WorkflowInputType,
      specId: node.kind,
    };
    if (node.description !== undefined) field.description = node.description;
    if (node.required !== undefined) field.required = node.required;
    if (node.placeholder !== undefined) field.placeholder = node.placeholder;
    if (node.defaultValue !== undefined) field.defaultValue = node.defaultValue;
    if (node.kind === 'input.dropdown' && node.options !== undefined) {
      field.options = node.options.map((o) => ({ label: o.label, value: o.value }));
    }
    fields.push(field);
  }
  return fields;
}
