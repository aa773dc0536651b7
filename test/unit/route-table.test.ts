import fc from 'fast-check';
import { OpenAPIBackend } from 'openapi-backend';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { loadOpenApiDocument } from '../../src/http/rest/rest-adapter.ts';
import { RouteTable } from '../../src/http/rest/route-table.ts';

/** The compiled route table answers exactly as openapi-backend's router does, for every route of the document. */

const t = suite<{ api: OpenAPIBackend; table: RouteTable }>('REST route table');
t.before(async (ctx) => {
  ctx.api = new OpenAPIBackend({ definition: loadOpenApiDocument(), validate: false, quick: true, ignoreTrailingSlashes: false });
  await ctx.api.init();
  ctx.table = new RouteTable(ctx.api.getOperations());
});

const METHODS = ['get', 'post', 'put', 'patch', 'delete', 'head', 'options', 'GET', ' Post '];
const ID = 'aaaaaaaa-0000-4000-8000-000000000001';

function same({ api, table }: { api: OpenAPIBackend; table: RouteTable }, method: string, path: string): void {
  const expected = api.matchOperation({ method, path, headers: {}, query: {} } as never);
  const actual = table.match(method, path);
  assert.is(actual?.operationId, expected?.operationId, `${method} ${JSON.stringify(path)}`);
  if (expected && actual) {
    let want: unknown;
    let got: unknown;
    try {
      want = api.router.parseRequest({ method, path, headers: {}, query: {} } as never, expected).params;
    } catch (err) {
      want = (err as Error).name;
    }
    try {
      got = table.params(actual, path);
    } catch (err) {
      got = (err as Error).name;
    }
    assert.equal(got, want, `params of ${method} ${JSON.stringify(path)}`);
  }
}

t('every documented route, its neighbours and odd paths match the same operation with the same parameters', (ctx) => {
  const paths = [
    '/workflows', `/workflows/${ID}`, `/workflows/${ID}/versions`, `/workflows/${ID}/accept-update`, '/runs', `/runs/${ID}`,
    `/runs/${ID}/cancel`, `/runs/${ID}/events`, `/runs/${ID}/stream`, '/openapi.json', '/', '', 'runs', '/runs/', `/runs/${ID}/`,
    '/runs//events', '/runs/a%20b', '/runs/%E0%A4%A', '/runs/x/y/z', '/workflows/x/versions/extra', ' /runs ', '/runs?x=1',
    `/runs/${ID}?a=b`, '/RUNS', '/runs/cancel', '/runs/events', '/runs/stream/stream',
  ];
  for (const path of paths) for (const method of METHODS) same(ctx, method, path);
});

t('random paths built from the document’s segments match alike', (ctx) => {
  const segment = fc.constantFrom('runs', 'workflows', ID, 'events', 'cancel', 'stream', 'versions', 'accept-update', '', 'x', '%41', 'openapi.json');
  fc.assert(
    fc.property(fc.constantFrom(...METHODS), fc.array(segment, { maxLength: 4 }), fc.boolean(), (method, parts, slash) => {
      same(ctx, method, `/${parts.join('/')}${slash ? '/' : ''}`);
    }),
    { numRuns: 500 },
  );
});

t.run();
