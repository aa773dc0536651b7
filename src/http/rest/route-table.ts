import type { Operation } from 'openapi-backend';

/**
 * openapi-backend's operation matching, compiled once. Its router rebuilds the flattened operation list
 * (lodash chains) and a RegExp per path template on every request, and parses path parameters with a
 * template compiled per call: a fifth of a GET /runs/{id}'s server CPU. This table keeps the same rules
 * (test/unit/route-table.test.ts compares the two on every route): an exact path with the method wins;
 * otherwise among the templates matching the path, the most specific (longest literal part) with the
 * method; path parameters are the percent-decoded segments.
 */

interface Route {
  operation: Operation;
  method: string;
  path: string;
  /** Matches the path with `[^/]+` per parameter (the router's pattern). */
  pattern: RegExp;
  /** Captures the parameters with `[^/]*` (the parameter parser's pattern). */
  capture: RegExp;
  names: string[];
  /** Length of the template without its parameters: the more, the more specific. */
  literal: number;
}

const escapeRegExp = (literal: string) => literal.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** The router's normalisation: trimmed, a leading slash, no query string. */
function normalise(raw: string): string {
  let path = raw.trim();
  if (!path.startsWith('/')) path = `/${path}`;
  return path.split('?')[0]!.trim();
}

export class RouteTable {
  readonly #routes: Route[];
  readonly #exact = new Map<string, Route[]>();
  readonly #byOperation = new Map<Operation, Route>();

  constructor(operations: Operation[]) {
    this.#routes = operations.map((operation) => {
      const path = operation.path;
      const pattern = new RegExp(`^${path.replace(/\{[^}]+\}/g, '\0').split('\0').map(escapeRegExp).join('[^/]+')}$`);
      const capture = new RegExp(`^${path.replace(/\{[A-Za-z0-9_-]+\}/g, '([^\\/]*)')}$`);
      const names = [...path.matchAll(/\{([A-Za-z0-9_-]+)\}/g)].map((m) => m[1]!);
      return { operation, method: operation.method, path, pattern, capture, names, literal: path.replace(/\{.*?\}/g, '').length };
    });
    for (const r of this.#routes) {
      this.#exact.set(r.path, [...(this.#exact.get(r.path) ?? []), r]);
      this.#byOperation.set(r.operation, r);
    }
    // Most specific first; a stable sort keeps the document's order among equals, as the router's orderBy does.
    this.#routes.sort((a, b) => b.literal - a.literal);
  }

  /** The operation for a method (any case) and a path relative to the API root, or undefined. */
  match(method: string, rawPath: string): Operation | undefined {
    const m = method.trim().toLowerCase();
    const path = normalise(rawPath);
    const exact = this.#exact.get(path)?.find((r) => r.method === m);
    if (exact) return exact.operation;
    return this.#routes.find((r) => r.method === m && r.pattern.test(path))?.operation;
  }

  /** The path parameters of a matched operation, percent-decoded (throws URIError on a malformed escape). */
  params(operation: Operation, path: string): Record<string, string> {
    const route = this.#byOperation.get(operation);
    const values = route?.capture.exec(normalise(path));
    const out: Record<string, string> = {};
    if (!route || !values) return out;
    route.names.forEach((name, i) => (out[name] = decodeURIComponent(values[i + 1]!)));
    return out;
  }
}
