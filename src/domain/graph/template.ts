import type { GraphNode, JsonValue } from './types.ts';

/**
 * Templates: `{{nodeId}}` is that node's value (strings as they are, anything else as JSON) and
 * `{{nodeId.a.b}}` reads into a JSON value. Pure, shared by the interpreter and the activities.
 */

const REFERENCE = /\{\{\s*([A-Za-z0-9_-]+)((?:\.[A-Za-z0-9_-]+)*)\s*\}\}/g;

export interface TemplateRef {
  node: string;
  path: string[];
}

export function templateRefs(template: string): TemplateRef[] {
  const refs: TemplateRef[] = [];
  for (const m of template.matchAll(REFERENCE)) {
    refs.push({ node: m[1], path: m[2] ? m[2].slice(1).split('.') : [] });
  }
  return refs;
}

/** Reads `path` into a JSON value; a string value is parsed as JSON first when a path is given. */
export function readPath(value: JsonValue | undefined, path: string[]): JsonValue | undefined {
  let current: JsonValue | undefined = value;
  if (path.length > 0 && typeof current === 'string') {
    try {
      current = JSON.parse(current) as JsonValue;
    } catch {
      return undefined;
    }
  }
  for (const key of path) {
    if (current === null || typeof current !== 'object') return undefined;
    current = Array.isArray(current) ? current[Number(key)] : current[key];
  }
  return current;
}

/** A value as text: strings as they are, null/undefined as empty, anything else as JSON. */
export function stringify(value: JsonValue | undefined): string {
  if (value === undefined || value === null) return '';
  return typeof value === 'string' ? value : JSON.stringify(value);
}

export function renderTemplate(template: string, lookup: (nodeId: string) => JsonValue | undefined): string {
  return template.replace(REFERENCE, (_all, node: string, path: string) => stringify(readPath(lookup(node), path ? path.slice(1).split('.') : [])));
}

/** The template-bearing fields of a node, by field name; used to find references and to render. */
export function templateFields(node: GraphNode): Record<string, string> {
  switch (node.kind) {
    case 'text.template':
      return { template: node.template };
    case 'llm.chat':
      return { prompt: node.prompt, ...(node.system !== undefined ? { system: node.system } : {}) };
    case 'condition':
      return { value: node.value };
    case 'http.request': {
      const fields: Record<string, string> = { url: node.url };
      if (node.body !== undefined) fields.body = node.body;
      for (const [k, v] of Object.entries(node.headers ?? {})) fields[`headers.${k}`] = v;
      return fields;
    }
    default:
      return {};
  }
}

/** `from` names a node, optionally with a path into its JSON value: `parsed.items.0`. */
export function parseFrom(from: string): TemplateRef {
  const [node, ...path] = from.split('.');
  return { node: node, path };
}

/** Every node this node waits for: `after`, `from`, `when.node` and the nodes its templates name. */
export function dependencies(node: GraphNode): string[] {
  const deps = new Set<string>(node.after ?? []);
  if ((node.kind === 'json.parse' || node.kind === 'output') && node.from) deps.add(parseFrom(node.from).node);
  if (node.when) deps.add(node.when.node);
  for (const t of Object.values(templateFields(node))) for (const r of templateRefs(t)) deps.add(r.node);
  return [...deps];
}
