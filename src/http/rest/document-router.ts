import { OpenAPIRouter, type Document, type Operation, type Request } from 'openapi-backend';

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
 * Requests are parsed by the stock parse: a parse of its own saved a few µs of a `GET /runs/{id}`,
 * too little for a second parser to keep equal to it.
 */

interface Route {
  operation: Operation;
  /** Matches the path with `[^/]+` per parameter (the router's pattern). */
  pattern: RegExp;
  /** Length of the template without its parameters: the more, the more specific. */
  literal: number;
}

const escapeRegExp = (literal: string) => literal.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

function compile(operation: Operation): Route {
  const path = operation.path;
  const pattern = new RegExp(`^${path.replace(/\{[^}]+\}/g, '\0').split('\0').map(escapeRegExp).join('[^/]+')}$`);
  return { operation, pattern, literal: path.replace(/\{.*?\}/g, '').length };
}

export class DocumentRouter extends OpenAPIRouter {
  readonly #operations: Operation[];
  /** Most specific first; a stable sort keeps the document's order among equals, as the router's orderBy does. */
  readonly #routes: Route[];
  /** The document's path templates as written, each a path item of its own. */
  readonly #paths: Set<string>;
  /** The API root without its trailing slash ('' for '/'). */
  readonly #root: string;

  constructor(opts: { definition: Document; apiRoot: string; ignoreTrailingSlashes: boolean }) {
    super(opts);
    this.#root = opts.apiRoot.replace(/\/$/, '');
    this.#operations = super.getOperations();
    this.#routes = this.#operations.map(compile).sort((a, b) => b.literal - a.literal);
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
      else for (const route of this.#routes) {
        if (!route.pattern.test(path)) continue;
        if (route.operation.method === method) return route.operation;
        refusal = '405-methodNotAllowed: this method is not registered for the route';
      }
    }
    if (strict) throw new Error(refusal);
    return undefined;
  }
}
