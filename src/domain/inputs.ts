import type { InputErrorDetail } from './errors.ts';
import { inputType, isInputKind, type Graph, type InputNode, type JsonValue } from './graph/types.ts';
import { canonicalJson } from './canonical-json.ts';
import { inexactNumberIn, parseJson, type InexactNumber } from './exact-json.ts';

/**
 * POST /runs input rules 1–5: keys by nodeId (preferred) or exact name, unknown keys rejected, names
 * shared by two inputs are ambiguous, nodeId+name only when equal, required present, values typed.
 * Pure: the result is the normalised inputs (by nodeId, defaults applied, unset optional → null),
 * which are also what the idempotency fingerprint covers.
 */

export const MEDIA_KINDS = ['image', 'audio', 'video', 'document', 'other'] as const;

export interface ResolvedInputs {
  /** Every input node by nodeId: the caller's value, else its default, else null. */
  values: Record<string, JsonValue>;
  /** nodeIds of password inputs: their values must be sealed and kept out of run state. */
  passwordIds: string[];
}

export type InputsResult = { ok: true; inputs: ResolvedInputs } | { ok: false; errors: InputErrorDetail[] };

export function inputNodes(graph: Graph): InputNode[] {
  return graph.nodes.filter((n): n is InputNode => isInputKind(n.kind));
}

export function resolveInputs(graph: Graph, raw: unknown): InputsResult {
  const nodes = inputNodes(graph);
  const errors: InputErrorDetail[] = [];
  // Absent is no inputs; null is refused like any other non-object (the document allows no null).
  if (raw !== undefined && (raw === null || typeof raw !== 'object' || Array.isArray(raw))) {
    return { ok: false, errors: [{ input: 'inputs', message: 'inputs must be an object keyed by input nodeId or name' }] };
  }
  const given = (raw ?? {}) as Record<string, JsonValue>;
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const byName = new Map<string, InputNode[]>();
  for (const n of nodes) {
    const name = n.name ?? n.id;
    byName.set(name, [...(byName.get(name) ?? []), n]);
  }

  // nodeId → [key used, value]
  const supplied = new Map<string, { key: string; value: JsonValue }>();
  for (const [key, value] of Object.entries(given)) {
    let node = byId.get(key);
    if (!node) {
      const named = byName.get(key) ?? [];
      if (named.length > 1) {
        const nodeIds = named.map((n) => n.id).join(', ');
        errors.push({ input: key, message: `input name "${key}" is ambiguous: ${named.length} inputs share it; use their nodeIds (${nodeIds})` });
        continue;
      }
      node = named[0];
    }
    if (!node) {
      errors.push({ input: key, message: `unknown input "${key}": use a nodeId or exact name from the workflow's inputSchema` });
      continue;
    }
    const previous = supplied.get(node.id);
    if (previous) {
      if (!jsonEqual(previous.value, value)) {
        errors.push({ input: key, message: `input "${node.id}" was sent as "${previous.key}" and "${key}" with different values` });
      }
      continue;
    }
    supplied.set(node.id, { key, value });
  }

  const values: Record<string, JsonValue> = {};
  const passwordIds: string[] = [];
  for (const node of nodes) {
    if (node.kind === 'input.password') passwordIds.push(node.id);
    const s = supplied.get(node.id);
    const present = s !== undefined && s.value !== null && s.value !== '';
    if (!present) {
      if (node.defaultValue !== undefined) {
        const d = coerce(node, node.defaultValue, true);
        values[node.id] = d.ok ? d.value : node.defaultValue;
      } else if (node.required) {
        errors.push({ input: s?.key ?? node.id, message: `input "${node.id}" (${node.name ?? node.id}) is required` });
      } else {
        values[node.id] = null;
      }
      continue;
    }
    // Before any type rule: a number the body's parse marked is not the value the caller sent.
    const inexact = inexactNumberIn(s.value);
    const c: Coerced = inexact ? { ok: false, message: inexactMessage(inexact) } : coerce(node, s.value, false);
    if (c.ok) values[node.id] = c.value;
    else errors.push({ input: s.key, message: `input "${s.key}": ${c.message}` });
  }
  return errors.length ? { ok: false, errors } : { ok: true, inputs: { values, passwordIds } };
}

const SHOWN_DIGITS = 40;

/** Why a number is refused, showing (the start of) its text. */
function inexactMessage(n: InexactNumber): string {
  const shown = n.source.length > SHOWN_DIGITS ? `${n.source.slice(0, SHOWN_DIGITS)}…` : n.source;
  return `the number ${shown} cannot be held exactly (numbers are 64-bit floats: up to 15 significant digits, magnitudes below 1.8e308)`;
}

type Coerced = { ok: true; value: JsonValue } | { ok: false; message: string };

function coerce(node: InputNode, value: JsonValue, fromDefault: boolean): Coerced {
  const type = inputType(node.kind);
  switch (type) {
    case 'text':
    case 'textarea':
    case 'password':
      return typeof value === 'string' ? { ok: true, value } : { ok: false, message: `expected a string for a ${type} input` };
    case 'number': {
      const n = fromDefault && typeof value === 'string' ? Number(value) : value;
      return typeof n === 'number' && Number.isFinite(n) ? { ok: true, value: n } : { ok: false, message: 'expected a JSON number' };
    }
    case 'url':
      return typeof value === 'string' && isHttpUrl(value) ? { ok: true, value } : { ok: false, message: 'expected an absolute http(s) URL' };
    case 'dropdown': {
      const allowed = (node.options ?? []).map((o) => o.value);
      return typeof value === 'string' && allowed.includes(value)
        ? { ok: true, value }
        : { ok: false, message: `expected one of: ${allowed.map((v) => JSON.stringify(v)).join(', ')}` };
    }
    case 'json': {
      if (typeof value !== 'string') return { ok: true, value };
      let parsed: unknown;
      try {
        parsed = parseJson(value);
      } catch {
        return { ok: false, message: 'expected a JSON value (a string must contain valid JSON)' };
      }
      const inexact = inexactNumberIn(parsed);
      return inexact ? { ok: false, message: `its JSON text holds ${inexactMessage(inexact)}` } : { ok: true, value: parsed as JsonValue };
    }
    case 'file':
      return coerceMedia(value);
    default:
      return { ok: false, message: `unsupported input type ${type}` };
  }
}

function coerceMedia(raw: JsonValue): Coerced {
  let value = raw;
  if (typeof value === 'string') {
    try {
      value = JSON.parse(value) as JsonValue;
    } catch {
      return { ok: false, message: 'expected a media object (or its JSON encoding)' };
    }
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return { ok: false, message: 'expected a media object' };
  const m = value as Record<string, JsonValue>;
  if (m.__workflowMedia !== true) return { ok: false, message: 'a media object needs "__workflowMedia": true' };
  if (typeof m.kind !== 'string' || !(MEDIA_KINDS as readonly string[]).includes(m.kind)) {
    return { ok: false, message: `media kind must be one of: ${MEDIA_KINDS.join(', ')}` };
  }
  if (typeof m.mimeType !== 'string' || !/^[\w.+-]+\/[\w.+-]+$/.test(m.mimeType)) return { ok: false, message: 'media mimeType must be a MIME type' };
  if (typeof m.filename !== 'string' || m.filename.length === 0) return { ok: false, message: 'media filename must be a non-empty string' };
  const hasUrl = m.url !== undefined;
  const hasB64 = m.base64 !== undefined;
  if (hasUrl === hasB64) return { ok: false, message: 'media needs exactly one of "url" or "base64"' };
  if (hasUrl) {
    if (typeof m.url !== 'string' || !m.url.startsWith('https://') || !isHttpUrl(m.url)) return { ok: false, message: 'media url must be an https URL' };
    if (carriesCredentials(m.url)) return { ok: false, message: 'media url must not carry credentials or tokens' };
  } else if (typeof m.base64 !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(m.base64)) {
    return { ok: false, message: 'media base64 must be base64 text' };
  }
  const allowed = new Set(['__workflowMedia', 'kind', 'url', 'base64', 'mimeType', 'filename']);
  const extra = Object.keys(m).filter((k) => !allowed.has(k));
  if (extra.length) return { ok: false, message: `unknown media fields: ${extra.join(', ')}` };
  return { ok: true, value: m };
}

const TOKEN_PARAMS = /^(api[_-]?key|key|token|access[_-]?token|auth|authorization|bearer|secret|password)$/i;

/** The spec forbids API keys or authorization tokens in media URLs. */
function carriesCredentials(url: string): boolean {
  const u = new URL(url);
  if (u.username || u.password) return true;
  for (const k of u.searchParams.keys()) if (TOKEN_PARAMS.test(k)) return true;
  return false;
}

function isHttpUrl(s: string): boolean {
  try {
    const u = new URL(s);
    return (u.protocol === 'http:' || u.protocol === 'https:') && u.hostname.length > 0;
  } catch {
    return false;
  }
}

export function jsonEqual(a: JsonValue, b: JsonValue): boolean {
  return canonicalJson(a) === canonicalJson(b);
}
