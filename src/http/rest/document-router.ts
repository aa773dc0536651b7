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
 * none `404-notFound`. Path parameters are the percent-decoded segments.
 */

interface Route {
  operation: Operation;
  /** Matches the path with `[^/]+` per parameter (the router's pattern). */
  pattern: RegExp;
  /** Captures the parameters with `[^/]*` (the parameter parser's pattern). */
  capture: RegExp;
  names: string[];
  /** Length of the template without its parameters: the more, the more specific. */
  literal: number;
}

const escapeRegExp = (literal: string) => literal.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

function compile(operation: Operation): Route {
  const path = operation.path;
  const pattern = new RegExp(`^${path.replace(/\{[^}]+\}/g, '\0').split('\0').map(escapeRegExp).join('[^/]+')}$`);
  const capture = new RegExp(`^${path.replace(/\{[A-Za-z0-9_-]+\}/g, '([^\\/]*)')}$`);
  const names = [...path.matchAll(/\{([A-Za-z0-9_-]+)\}/g)].map((m) => m[1]!);
  return { operation, pattern, capture, names, literal: path.replace(/\{.*?\}/g, '').length };
}

export class DocumentRouter extends OpenAPIRouter {
  readonly #operations: Operation[];
  /** Most specific first; a stable sort keeps the document's order among equals, as the router's orderBy does. */
  readonly #routes: Route[];
  readonly #byOperation = new Map<Operation, Route>();
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
  }

  override getOperations(): Operation[] {
    return this.#operations;
  }

  override matchOperation(req: Request): Operation | undefined;
  override matchOperation(req: Request, strict: boolean): Operation;
  override matchOperation(req: Request, strict?: boolean): Operation | undefined {
    const { path: rawPath, method } = this.normalizeRequest(req);
    const refuse = (message: string) => {
      if (strict) throw new Error(message);
      return undefined;
    };
    if (rawPath !== this.#root && !rawPath.startsWith(`${this.#root}/`)) return refuse('404-notFound: no route matches request');
    const path = this.normalizePath(rawPath);
    const exact = this.#operations.find((op) => op.path === path && op.method === method);
    if (exact) return exact;
    const matching = this.#routes.filter((route) => route.pattern.test(path));
    if (!matching.length) return refuse('404-notFound: no route matches request');
    const withMethod = matching.find((route) => route.operation.method === method);
    return withMethod?.operation ?? refuse('405-methodNotAllowed: this method is not registered for the route');
  }

  override parseRequest(req: Request, operation?: Operation): ParsedRequest {
    const parsed = super.parseRequest(req);
    const route = operation && this.#byOperation.get(operation);
    if (!route) return parsed;
    const values = route.capture.exec(this.normalizePath(parsed.path));
    const params: Record<string, string> = {};
    if (values) route.names.forEach((name, i) => (params[name] = decodeURIComponent(values[i + 1]!)));
    return { ...parsed, params };
  }
}
