import { OpenAPIRouter, type Document, type Operation, type ParsedRequest, type Request } from 'openapi-backend';

/**
 * openapi-backend's router (its rules, its errors) with each path template compiled once. The stock
 * router rebuilds the operation list from the document, a RegExp per path template and a path
 * parameter parser on every request, which cost more than the rest of a `GET /runs/{id}`
 * (docs/performance.md, "REST routing"). openapi-backend has no option for it; handleRequest uses
 * this router once rest-adapter.ts installs it. test/unit/document-router.test.ts holds both routers
 * to the same answers on every route.
 *
 * Rules kept: a path equal to a template with the method wins; otherwise the templates matching the
 * path are ordered by the length of their literal part (longest first, document order among equals)
 * and the first with the method wins; a path matched without its method is `405-methodNotAllowed`,
 * none `404-notFound`. Path parameters are the percent-decoded segments. One rule differs, OpenAPI's:
 * a path equal to a template is that path item alone (`GET /runs/batch` is 405, not `GET /runs/{id}`),
 * so a 405's Allow names the methods the document gives that path.
 *
 * Its parse gives the stock parse's result with less work (see parseRequest).
 */

interface Route {
  operation: Operation;
  /** Matches the path with `[^/]+` per parameter (the router's pattern). */
  pattern: RegExp;
  /** Length of the template without its parameters: the more, the more specific. */
  literal: number;
  /** The path parameters, percent-decoded, captured with `[^/]*` each (the stock parameter parser's pattern). */
  params: (path: string) => Record<string, string>;
}

const escapeRegExp = (literal: string) => literal.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

function compile(operation: Operation): Route {
  const path = operation.path;
  const pattern = new RegExp(
    `^${path
      .replace(/\{[^}]+\}/g, '\0')
      .split('\0')
      .map(escapeRegExp)
      .join('[^/]+')}$`,
  );
  const capture = new RegExp(`^${path.replace(/\{[A-Za-z0-9_-]+\}/g, '([^\\/]*)')}$`);
  const names = [...path.matchAll(/\{([A-Za-z0-9_-]+)\}/g)].map((m) => m[1]);
  const params = (relative: string) => {
    const values = capture.exec(relative);
    const out: Record<string, string> = {};
    if (values) for (let i = 0; i < names.length; i++) out[names[i]] = decodeURIComponent(values[i + 1]);
    return out;
  };
  return { operation, pattern, literal: path.replace(/\{.*?\}/g, '').length, params };
}

export class DocumentRouter extends OpenAPIRouter {
  readonly #operations: Operation[];
  /** Most specific first; a stable sort keeps the document's order among equals, as the router's orderBy does. */
  readonly #routes: Route[];
  readonly #byOperation = new Map<Operation, Route>();
  /** The document's path templates as written, each a path item of its own. */
  readonly #paths: Set<string>;
  /** The API root without its trailing slash ('' for '/'). */
  readonly #root: string;

  constructor(opts: { definition: Document; apiRoot: string; ignoreTrailingSlashes: boolean }) {
    super(opts);
    this.#root = opts.apiRoot.replace(/\/$/, '');
    this.#operations = super.getOperations();
    for (const operation of this.#operations) {
      // The stock parser also decodes `content` and non-exploded query parameters; this one does not.
      const special = operation.parameters?.find((p) => 'in' in p && (p.content || p.explode === false));
      if (special) throw new Error(`DocumentRouter: ${operation.operationId} has a parameter it cannot parse (${'name' in special ? special.name : ''})`);
    }
    this.#routes = this.#operations.map(compile).sort((a, b) => b.literal - a.literal);
    for (const route of this.#routes) this.#byOperation.set(route.operation, route);
    this.#paths = new Set(this.#operations.map((operation) => operation.path));
  }

  override getOperations(): Operation[] {
    return this.#operations;
  }

  override matchOperation(req: Request): Operation | undefined;
  override matchOperation(req: Request, strict: boolean): Operation;
  override matchOperation(req: Request, strict?: boolean): Operation | undefined {
    const { path: rawPath, method } = this.normalizeRequest(req);
    let refusal = '404-notFound: no route matches request';
    if (rawPath === this.#root || rawPath.startsWith(`${this.#root}/`)) {
      const path = this.normalizePath(rawPath);
      for (const operation of this.#operations) if (operation.path === path && operation.method === method) return operation;
      if (this.#paths.has(path)) refusal = '405-methodNotAllowed: this method is not registered for the route';
      else
        for (const route of this.#routes) {
          if (!route.pattern.test(path)) continue;
          if (route.operation.method === method) return route.operation;
          refusal = '405-methodNotAllowed: this method is not registered for the route';
        }
    }
    if (strict) throw new Error(refusal);
    return undefined;
  }

  /**
   * The stock parse's result (test/unit/document-router.test.ts holds them equal) without the work it
   * repeats, and without its one failure here: it first turns an object query into a URLSearchParams,
   * which throws on the member object a `deepObject` parameter (`metadata[k]=v`) becomes in the adapter's
   * prototype-free query, so a metadata filter would be answered 500. It repeats on each of
   * handleRequest's three parses of a request what this API does not need: lodash copies of the headers
   * and a deep copy of the query, a cookie parse of no cookie header, and a path template parser built
   * per call. A request with a cookie, a body or a query string (the adapter passes
   * neither of the last two) takes the stock parse. The query is copied on every parse: validation
   * coerces its copy in place.
   */
  override parseRequest(req: Request, operation?: Operation): ParsedRequest {
    const route = operation && this.#byOperation.get(operation);
    const headers: Record<string, string | string[]> = {};
    for (const name of Object.keys(req.headers)) headers[name.toLowerCase()] = req.headers[name]!;
    if (req.body !== undefined || headers.cookie !== undefined || typeof req.query !== 'object') {
      const parsed = super.parseRequest(req);
      return route ? { ...parsed, params: route.params(this.normalizePath(parsed.path)) } : parsed;
    }
    const normalized = this.normalizeRequest(req);
    const params = route ? route.params(this.normalizePath(normalized.path)) : {};
    return { ...normalized, params, headers, query: copyQuery(req.query), cookies: {}, requestBody: undefined };
  }
}

/**
 * A request's query as the stock parse copies it: its own copy of every value (strings, or arrays of
 * them), and without a prototype, as the adapter builds it, so no parameter name is special.
 */
function copyQuery(query: Record<string, unknown>): Record<string, unknown> {
  const copy = Object.create(null) as Record<string, unknown>;
  for (const name of Object.keys(query)) {
    const value = query[name];
    if (Array.isArray(value)) copy[name] = [...(value as readonly unknown[])];
    else copy[name] = value !== null && typeof value === 'object' ? Object.assign(Object.create(null), value) : value;
  }
  return copy;
}
