import fc from 'fast-check';
import { OpenAPIBackend, OpenAPIRouter, type Operation } from 'openapi-backend';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { DocumentRouter } from '../../src/http/rest/document-router.ts';
import { loadOpenApiDocument } from '../../src/http/rest/rest-adapter.ts';

/** The compiled router answers exactly as openapi-backend's own, for every route of the document and odd paths. */

interface Routers {
  stock: OpenAPIRouter;
  compiled: DocumentRouter;
}
const t = suite<Routers>('REST document router');
t.before(async (ctx) => {
  const api = new OpenAPIBackend({ definition: loadOpenApiDocument(), validate: false, quick: true, ignoreTrailingSlashes: false, apiRoot: '/v1' });
  await api.init();
  ctx.stock = new OpenAPIRouter({ definition: api.definition, apiRoot: '/v1', ignoreTrailingSlashes: false });
  ctx.compiled = new DocumentRouter({ definition: api.definition, apiRoot: '/v1', ignoreTrailingSlashes: false });
});

const METHODS = ['get', 'post', 'put', 'patch', 'delete', 'head', 'options', 'GET', ' Post '];
const ID = 'aaaaaaaa-0000-4000-8000-000000000001';

/** The operation, or the error's name and message (strict matching throws 404 and 405 errors). */
function outcome(router: OpenAPIRouter, method: string, path: string): { id?: string; error?: string; params?: unknown } {
  let op: Operation;
  try {
    op = router.matchOperation({ method, path, headers: {}, query: {} }, true);
  } catch (err) {
    return { error: (err as Error).message };
  }
  try {
    return { id: op.operationId, params: router.parseRequest({ method, path, headers: {}, query: {} }, op).params };
  } catch (err) {
    return { id: op.operationId, error: (err as Error).name };
  }
}

const NOT_ALLOWED = '405-methodNotAllowed: this method is not registered for the route';

function same({ stock, compiled }: Routers, method: string, path: string): void {
  const loose = (router: OpenAPIRouter) => router.matchOperation({ method, path, headers: {} });
  // The one rule that differs (document-router.ts): the stock router lets a template take a path that is
  // a path item of its own (GET /runs/batch as GET /runs/{id}); OpenAPI gives that path its own methods.
  const taken = loose(stock);
  const relative = stock.normalizePath(stock.normalizeRequest({ method, path, headers: {} }).path);
  const own = taken !== undefined && taken.path !== relative && stock.getOperations().some((op) => op.path === relative);
  const want = own ? { error: NOT_ALLOWED } : outcome(stock, method, path);
  assert.equal(outcome(compiled, method, path), want, `${method} ${JSON.stringify(path)}`);
  assert.is(loose(compiled)?.operationId, own ? undefined : taken?.operationId, `non-strict ${method} ${JSON.stringify(path)}`);
}

t('a path that is a path item of its own takes only its methods: GET /runs/batch is 405, not GET /runs/{id}', ({ compiled }) => {
  for (const path of ['/v1/runs/batch', '/v1/runs/cancel', '/v1/runs/replay']) {
    assert.is(outcome(compiled, 'get', path).error, NOT_ALLOWED, path);
    assert.is(outcome(compiled, 'options', path).error, NOT_ALLOWED, path);
    assert.is(compiled.matchOperation({ method: 'post', path, headers: {} })?.path, path.slice(3));
  }
});

t('every documented route, its neighbours and odd paths match the same operation with the same parameters', (ctx) => {
  const paths = [
    '/workflows',
    `/workflows/${ID}`,
    `/workflows/${ID}/versions`,
    `/workflows/${ID}/accept-update`,
    '/runs',
    `/runs/${ID}`,
    `/runs/${ID}/cancel`,
    `/runs/${ID}/events`,
    `/runs/${ID}/stream`,
    '/openapi.json',
    '/',
    '',
    'runs',
    '/runs/',
    `/runs/${ID}/`,
    '/runs//events',
    '/runs/a%20b',
    '/runs/%E0%A4%A',
    '/runs/x/y/z',
    '/workflows/x/versions/extra',
    ' /runs ',
    '/runs?x=1',
    `/runs/${ID}?a=b`,
    '/RUNS',
    '/runs/cancel',
    '/runs/batch',
    '/runs/replay',
    `/runs/${ID}/replay`,
    '/runs/events',
    '/runs/stream/stream',
  ];
  for (const path of paths) for (const prefix of ['/v1', '', '/v1x', '/v2']) for (const method of METHODS) same(ctx, method, `${prefix}${path}`);
  same(ctx, 'get', '/v1');
});

t('random paths built from the document’s segments match alike', (ctx) => {
  const segment = fc.constantFrom(
    'v1',
    'runs',
    'workflows',
    ID,
    'events',
    'cancel',
    'batch',
    'replay',
    'stream',
    'versions',
    'accept-update',
    '',
    'x',
    '%41',
    'openapi.json',
  );
  fc.assert(
    fc.property(fc.constantFrom(...METHODS), fc.array(segment, { maxLength: 5 }), fc.boolean(), (method, parts, slash) => {
      same(ctx, method, `/v1/${parts.join('/')}${slash ? '/' : ''}`);
    }),
    { numRuns: 500 },
  );
});

/** A parse as JSON text with its keys in order (the stock parse's query has a prototype, the adapter's and this router's none). */
const asText = (parsed: unknown): string =>
  JSON.stringify(parsed, (_key, value: unknown) =>
    value && typeof value === 'object' && !Array.isArray(value)
      ? Object.fromEntries(Object.entries(value).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : value,
  );

t('a request parses as the stock router parses it, however often and with whatever query', (ctx) => {
  const name = fc.constantFrom('limit', 'offset', 'status', 'afterSequence', 'constructor', '__proto__', 'toString', 'a b', '');
  const value = fc.oneof(fc.string({ maxLength: 4 }), fc.array(fc.string({ maxLength: 3 }), { minLength: 2, maxLength: 3 }));
  const headers = fc.dictionary(fc.constantFrom('Authorization', 'last-event-id', 'Cookie', 'cookie', 'X-Request-Id', 'prefer'), fc.string({ maxLength: 6 }));
  const paths = ['/v1/runs', `/v1/runs/${ID}`, '/v1/runs/a%20b', `/v1/runs/${ID}/events`, '/v1/workflows/x/versions', '/v1/nowhere'];
  fc.assert(
    fc.property(
      fc.constantFrom(...paths),
      fc.constantFrom('get', 'POST'),
      headers,
      fc.array(fc.tuple(name, value), { maxLength: 4 }),
      (path, method, head, pairs) => {
        const query = Object.create(null) as Record<string, string | string[]>;
        for (const [key, v] of pairs) query[key] = v;
        const request = { method, path, headers: head, query };
        // Each router is given its own operation, as handleRequest gives it.
        const same = (req: typeof request, routed: boolean) => {
          const parse = (router: OpenAPIRouter) => asText(router.parseRequest(req, routed ? router.matchOperation(req) : undefined));
          assert.is(parse(ctx.compiled), parse(ctx.stock), `${method} ${path}`);
        };
        // handleRequest's parses: before routing, routed, for validation (on a copy of the request).
        for (const req of [request, request, { ...request }]) for (const routed of [false, true]) same(req, routed);
        // Each parse is its own: coercing one (as validation does) leaves the next alone.
        const first = ctx.compiled.parseRequest(request, ctx.compiled.matchOperation(request));
        Object.assign(first.query as object, { limit: 7 });
        Object.assign(first.params as object, { id: 'x' });
        Object.assign(first.headers as object, { prefer: 1 });
        same(request, true);
        // A request whose query was replaced (the adapter empties it for lenient operations) parses its new query.
        request.query = Object.create(null) as typeof query;
        same(request, true);
      },
    ),
    { numRuns: 300 },
  );
});

t.run();
