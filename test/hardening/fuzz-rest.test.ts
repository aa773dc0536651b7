import { readFileSync } from 'node:fs';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { parse } from 'yaml';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { assertMatchesContract } from '../helpers/openapi-contract.ts';
import { asHeaderValue, countRuns, FUZZ_KEY, loadExtraCatalog, V, W } from './helpers/hardening.ts';

/**
 * Property-based fuzzing of every operation of openapi/openapi.yaml with random and mutated requests:
 * path ids, query parameters (the document's names plus random ones), headers (Authorization variants,
 * Idempotency-Key, Last-Event-ID, Content-Type, X-Request-Id) and POST /runs bodies (random, deeply
 * nested, huge, unicode, prototype-pollution keys, wrong types, valid-looking bodies with mutated
 * inputs). Properties: never a 5xx; every response matches the document (so every non-2xx is the
 * error envelope); a POST /runs that is not answered 202 creates no run; the server stays up.
 */

type Json = any;
const doc = parse(readFileSync(fileURLToPath(new URL('../../openapi/openapi.yaml', import.meta.url)), 'utf8')) as Json;
const resolve = (o: Json): Json =>
  o && typeof o.$ref === 'string'
    ? o.$ref
        .slice(2)
        .split('/')
        .reduce((a: Json, k: string) => a?.[k], doc)
    : o;

interface Operation {
  id: string;
  method: string;
  template: string;
  pathParams: string[];
  queryParams: string[];
  headerParams: string[];
  hasBody: boolean;
}

const OPERATIONS: Operation[] = Object.entries<Json>(doc.paths).flatMap(([template, item]) =>
  Object.entries<Json>(item)
    .filter(([m]) => ['get', 'post', 'put', 'patch', 'delete'].includes(m))
    .map(([method, op]) => {
      const params = [...(item.parameters ?? []), ...(op.parameters ?? [])].map(resolve);
      return {
        id: op.operationId as string,
        method: method.toUpperCase(),
        template,
        pathParams: params.filter((p) => p.in === 'path').map((p) => p.name as string),
        queryParams: params.filter((p) => p.in === 'query').map((p) => p.name as string),
        headerParams: params.filter((p) => p.in === 'header').map((p) => p.name as string),
        hasBody: Boolean(op.requestBody),
      };
    }),
);
/** FUZZ_SCALE=10 runs ten times as many cases (local exploration); the default keeps the suite fast. */
const SCALE = Math.max(1, Number(process.env.FUZZ_SCALE ?? 1) || 1);
const ALL_QUERY_NAMES = [...new Set(OPERATIONS.flatMap((o) => o.queryParams))];

interface FuzzRequest {
  op: Operation;
  path: string;
  headers: Record<string, string>;
  body?: string;
}

interface Observed {
  status: number;
  code?: string;
  contentType: string;
}

interface Ctx {
  t: TestApp;
  /** Ids that exist: the fuzzer's runs (pending and cancelled), someone else's run, workflows, versions. */
  ids: string[];
  seen: Observed[];
}

const s = suite<Ctx>('fuzzing every REST operation from the OpenAPI document');

s.before(async (ctx) => {
  ctx.t = await startTestApp();
  await loadExtraCatalog(ctx.t);
  const start = (key: string, body: unknown) => ctx.t.call('POST', '/runs', { key, body });
  const pending = await start(FUZZ_KEY, { workflow: W.typed, inputs: { n: 1 } });
  const cancelled = await start(FUZZ_KEY, { workflow: W.summary, inputs: { topic: 'x' } });
  await ctx.t.call('POST', `/runs/${cancelled.body.run.id}/cancel`, { key: FUZZ_KEY });
  const bobs = await start('wr_test_bob', { workflow: W.summary, inputs: { topic: 'bob' } });
  assert.is(bobs.status, 202);
  ctx.ids = [pending.body.run.id, cancelled.body.run.id, bobs.body.run.id, ...Object.values(W), ...Object.values(V)];
  ctx.seen = [];
});
s.after(async (ctx) => ctx.t.close());

// ---------------------------------------------------------------------------------------------------
// Arbitraries

const loneSurrogate = fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c));
/** Strings a hostile client would send: unicode, control characters, NUL, lone surrogates, injections. */
const nastyString = fc.oneof(
  fc.string({ unit: 'grapheme', maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.tuple(fc.string({ maxLength: 8 }), loneSurrogate, fc.string({ maxLength: 8 })).map((p) => p.join('')),
  fc.constantFrom(
    '',
    ' ',
    '\u0000',
    'a\u0000b',
    "' or 1=1 --",
    '"; drop table runs; --',
    '\\',
    '%',
    '%25',
    '%00',
    '../../etc/passwd',
    '\u202eevil',
    '😀👍🏽',
    '\ufeff',
    'null',
    'undefined',
    '{}',
    '[]',
    '__proto__',
    'constructor',
  ),
);

const idArb = (known: string[]) =>
  fc.oneof(
    { arbitrary: fc.constantFrom(...known), weight: 4 },
    { arbitrary: fc.uuid(), weight: 2 },
    { arbitrary: fc.constantFrom(...known).map((id) => id.toUpperCase()), weight: 1 },
    { arbitrary: nastyString, weight: 3 },
    { arbitrary: fc.integer({ min: 100, max: 3000 }).map((n) => 'a'.repeat(n)), weight: 1 },
    { arbitrary: fc.constantFrom('%E0%A4%A', '%', '%zz', '..', '.', '{id}', '00000000-0000-0000-0000-000000000000', '1', '-1'), weight: 1 },
  );

/** Encoded as a client would (most of the time), or sent raw so malformed escapes reach the server. */
function encodeSegment(value: string, raw: boolean): string {
  if (raw) return value.replace(/[#?/]/g, encodeURIComponent);
  try {
    return encodeURIComponent(value);
  } catch {
    return value.replace(/[\ud800-\udfff]/g, '%ED%A0%80');
  }
}

const queryValue = fc.oneof(
  fc.constantFrom('0', '1', '20', '50', '51', '-1', '1.5', '1e3', '0x10', ' 10', '9007199254740991', '9007199254740993', '99999999999999999999'),
  fc.constantFrom('running', 'suspended', 'pending', 'completed', 'free', 'per_run', 'owned', 'wallet', 'purchase_required', 'SUMMAR', '%', '_'),
  fc.uuid(),
  fc.integer().map(String),
  nastyString,
);
const queryArb = (op: Operation) =>
  fc.array(
    fc.tuple(
      fc.oneof(
        { arbitrary: fc.constantFrom(...(op.queryParams.length ? op.queryParams : ALL_QUERY_NAMES)), weight: 4 },
        { arbitrary: fc.constantFrom(...ALL_QUERY_NAMES), weight: 1 },
        { arbitrary: nastyString, weight: 1 },
      ),
      queryValue,
      fc.boolean(),
    ),
    { maxLength: 5 },
  );

const authArb = fc.oneof(
  { arbitrary: fc.constant(`Bearer ${FUZZ_KEY}`), weight: 8 },
  {
    arbitrary: fc.constantFrom(
      `bearer ${FUZZ_KEY}`,
      `Bearer   ${FUZZ_KEY}   `,
      `Bearer ${FUZZ_KEY}x`,
      `Bearer ${FUZZ_KEY.toUpperCase()}`,
      `Token ${FUZZ_KEY}`,
      `Basic ${Buffer.from(`${FUZZ_KEY}:`).toString('base64')}`,
      'Bearer',
      'Bearer ',
      '',
      'Bearer wr_test_bob_read',
      'Bearer wr_test_bob_exec',
      'Bearer wr_test_bob_revoked',
      'Bearer wr_test_bob_expired',
      'Bearer wr_test_mallory',
    ),
    weight: 3,
  },
  { arbitrary: nastyString.map((x) => `Bearer ${x}`), weight: 2 },
  { arbitrary: fc.integer({ min: 200, max: 4000 }).map((n) => `Bearer ${'k'.repeat(n)}`), weight: 1 },
  { arbitrary: fc.constant(undefined), weight: 1 },
);

const headersArb = (op: Operation) =>
  fc.record(
    {
      authorization: authArb,
      'idempotency-key': fc.oneof(
        nastyString,
        fc.integer({ min: 0, max: 600 }).map((n) => 'i'.repeat(n)),
        fc.uuid(),
      ),
      'last-event-id': fc.oneof(fc.constantFrom('0', '1', '2', '-1', 'abc', '1.0', ' 3 ', '9007199254740993', '99999999999999999'), nastyString),
      'content-type': fc.constantFrom(
        'application/json',
        'application/json; charset=utf-8',
        'application/vnd.api+json',
        'APPLICATION/JSON',
        'text/plain',
        'application/x-www-form-urlencoded',
        'multipart/form-data; boundary=x',
        'application/jsonp',
        '',
      ),
      'x-request-id': nastyString,
      accept: fc.constantFrom('application/json', 'text/event-stream', '*/*', 'text/html'),
    },
    { requiredKeys: op.hasBody ? ['authorization', 'content-type'] : ['authorization'] },
  );

function nested(depth: number, kind: 'array' | 'object' | 'mixed', leaf = '1'): string {
  let open = '';
  let close = '';
  for (let i = 0; i < depth; i++) {
    const arr = kind === 'array' || (kind === 'mixed' && i % 2 === 0);
    open += arr ? '[' : '{"k":';
    close = (arr ? ']' : '}') + close;
  }
  return open + leaf + close;
}

const typedInputValue = (id: string) => {
  const valid: Record<string, fc.Arbitrary<unknown>> = {
    n: fc.double({ noNaN: true, noDefaultInfinity: true }),
    title: fc.string({ unit: 'grapheme', maxLength: 30 }),
    body: fc.string({ unit: 'grapheme', maxLength: 60 }),
    site: fc.webUrl(),
    data: fc.jsonValue({ maxDepth: 4 }),
    pic: fc.record({
      __workflowMedia: fc.constant(true),
      kind: fc.constantFrom('image', 'audio', 'video', 'document', 'other'),
      url: fc.webUrl({ validSchemes: ['https'] }),
      mimeType: fc.constantFrom('image/png', 'audio/mpeg', 'application/pdf'),
      filename: fc.constantFrom('a.png', 'b.mp3', 'c.pdf'),
    }),
    token: fc.string({ minLength: 1, maxLength: 40 }),
  };
  const mutated = fc.oneof(
    fc.jsonValue({ maxDepth: 2 }),
    nastyString,
    fc.constantFrom(null, '', 0, -1, true, [], {}, 'ftp://x', 'javascript:alert(1)', 'https://user:pw@example.com/a.png'),
    fc.constant(JSON.parse(nested(70, 'mixed'))),
    fc.record(
      {
        __workflowMedia: fc.oneof(fc.constant(true), fc.jsonValue()),
        kind: fc.oneof(fc.constantFrom('image', 'sculpture'), nastyString),
        url: fc.constantFrom(
          'https://user:pw@example.com/a.png',
          'https://example.com/a.png?token=abc',
          'http://example.com/a.png',
          'https://127.0.0.1/x',
          'https://[::1]/',
          'not a url',
        ),
        base64: fc.constantFrom('aGVsbG8=', '***', ''),
        mimeType: fc.oneof(fc.constant('image/png'), nastyString),
        filename: fc.oneof(fc.constant('a.png'), nastyString),
        extra: fc.jsonValue(),
      },
      { requiredKeys: [] },
    ),
  );
  return fc.oneof({ arbitrary: valid[id] ?? fc.string(), weight: 2 }, { arbitrary: mutated, weight: 1 });
};

const TYPED_INPUTS = ['title', 'body', 'site', 'data', 'pic', 'token', 'n'];

/** POST /runs bodies, as the raw text sent. */
const bodyArb = (ids: string[]) =>
  fc.oneof(
    // Random JSON of any shape, and random text that is mostly not JSON.
    { arbitrary: fc.json({ maxDepth: 4 }), weight: 2 },
    { arbitrary: fc.string({ unit: 'binary', maxLength: 200 }), weight: 1 },
    // Truncated valid bodies.
    {
      arbitrary: fc
        .tuple(fc.constant(JSON.stringify({ workflow: W.typed, inputs: { n: 1, title: 'truncated' } })), fc.nat())
        .map(([text, cut]) => text.slice(0, cut % text.length)),
      weight: 1,
    },
    // Deeply nested JSON at the top level, in `inputs`, or in a json input.
    {
      arbitrary: fc
        .record({
          depth: fc.oneof(fc.integer({ min: 60, max: 2000 }), fc.constant(10_000)),
          kind: fc.constantFrom('array', 'object', 'mixed') as fc.Arbitrary<'array' | 'object' | 'mixed'>,
          where: fc.constantFrom('top', 'field', 'inputs', 'data'),
        })
        .map(({ depth, kind, where }) => {
          const deep = nested(depth, kind);
          if (where === 'top') return deep;
          if (where === 'field') return `{"workflow":"${W.typed}","inputs":{"n":1},"extra":${deep}}`;
          if (where === 'inputs') return `{"workflow":"${W.typed}","inputs":${deep}}`;
          return `{"workflow":"${W.typed}","inputs":{"n":1,"data":${deep}}}`;
        }),
      weight: 2,
    },
    // Huge strings, around and over the 1 MiB body limit.
    {
      arbitrary: fc
        .tuple(
          fc.constantFrom(50_000, 1_048_000, 1_048_600, 1_100_000, 2_500_000),
          fc.constantFrom('x', 'é', '😀'),
          fc.constantFrom('title', 'idempotencyKey', 'workflow'),
        )
        .map(([bytes, ch, field]) => {
          const text = ch.repeat(Math.floor(bytes / Buffer.byteLength(ch)));
          if (field === 'title') return JSON.stringify({ workflow: W.typed, inputs: { n: 1, title: text } });
          return JSON.stringify({
            workflow: field === 'workflow' ? text : W.typed,
            inputs: { n: 1 },
            ...(field === 'idempotencyKey' ? { idempotencyKey: text } : {}),
          });
        }),
      weight: 1,
    },
    // Prototype pollution attempts.
    {
      arbitrary: fc.constantFrom(
        `{"__proto__":{"polluted":true,"workflow":"${W.typed}"},"inputs":{"n":1}}`,
        `{"workflow":"${W.typed}","inputs":{"n":1,"__proto__":{"polluted":true}}}`,
        `{"workflow":"${W.typed}","inputs":{"n":1,"constructor":{"prototype":{"polluted":true}}}}`,
        `{"workflow":"${W.typed}","constructor":{"prototype":{"polluted":true}},"inputs":{"n":1}}`,
        `{"workflow":"__proto__","inputs":{}}`,
        `{"workflow":"${W.typed}","inputs":{"n":1,"data":{"__proto__":{"polluted":true},"constructor":{"prototype":{"polluted":true}}}}}`,
        `{"workflow":"${W.typed}","inputs":{"n":1,"pic":{"__workflowMedia":true,"kind":"image","base64":"aGk=","mimeType":"image/png","filename":"a.png","__proto__":{"polluted":true}}}}`,
        `{"workflow":"${W.typed}","inputs":{"toString":1,"hasOwnProperty":2,"valueOf":3,"n":1}}`,
      ),
      weight: 1,
    },
    // Every field with a wrong (random) type.
    {
      arbitrary: fc
        .record(
          {
            workflow: fc.jsonValue({ maxDepth: 2 }),
            workflowId: fc.jsonValue({ maxDepth: 2 }),
            version: fc.jsonValue({ maxDepth: 2 }),
            inputs: fc.jsonValue({ maxDepth: 3 }),
            idempotencyKey: fc.jsonValue({ maxDepth: 2 }),
          },
          { requiredKeys: [] },
        )
        .map((b) => JSON.stringify(b)),
      weight: 2,
    },
    // Valid bodies, so that accepted requests are always among the generated ones.
    { arbitrary: fc.integer({ min: -1000, max: 1000 }).map((n) => JSON.stringify({ workflow: W.typed, inputs: { n } })), weight: 1 },
    // Valid-looking bodies with mutated inputs, ids and versions.
    {
      arbitrary: fc
        .record({
          workflow: fc.oneof(
            { arbitrary: fc.constantFrom(W.typed, W.summary), weight: 4 },
            { arbitrary: fc.constantFrom(...ids), weight: 1 },
            { arbitrary: nastyString, weight: 1 },
          ),
          version: fc.option(fc.oneof(fc.constantFrom(...Object.values(V)), fc.uuid(), nastyString), { nil: undefined }),
          inputs: fc.oneof(
            fc.record(Object.fromEntries(TYPED_INPUTS.map((k) => [k, typedInputValue(k)])), { requiredKeys: ['n'] }),
            fc.record(
              {
                topic: fc.oneof(fc.string(), fc.jsonValue()),
                Topic: fc.string(),
                count: fc.jsonValue(),
                tone: fc.oneof(fc.constantFrom('formal', 'casual'), nastyString),
              },
              { requiredKeys: [] },
            ),
            fc.dictionary(nastyString, fc.jsonValue({ maxDepth: 2 }), { maxKeys: 6 }),
          ),
          idempotencyKey: fc.option(
            fc.oneof(
              nastyString,
              fc.integer({ min: 250, max: 260 }).map((n) => 'k'.repeat(n)),
            ),
            { nil: undefined },
          ),
        })
        .map((b) => JSON.stringify(b)),
      weight: 4,
    },
  );

function buildRequest(
  op: Operation,
  pathValues: string[],
  rawPath: boolean,
  query: [string, string, boolean][],
  headers: Record<string, string | undefined>,
  body?: string,
): FuzzRequest {
  let i = 0;
  const path = op.template.replace(/\{[^}]+\}/g, () => encodeSegment(pathValues[i++] ?? '', rawPath));
  const qs = query.map(([k, v, raw]) => `${encodeSegment(k, raw)}=${encodeSegment(v, raw)}`).join('&');
  const h: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers)) if (v !== undefined) h[k] = asHeaderValue(v);
  return { op, path: qs ? `${path}?${qs}` : path, headers: h, body };
}

const requestArb = (ids: string[]) =>
  fc
    .constantFrom(...OPERATIONS)
    .chain((op) =>
      fc
        .tuple(
          fc.array(idArb(ids), { minLength: op.pathParams.length, maxLength: op.pathParams.length }),
          fc.boolean(),
          queryArb(op),
          headersArb(op),
          op.method === 'POST' ? fc.option(bodyArb(ids), { nil: undefined, freq: op.hasBody ? 8 : 2 }) : fc.constant(undefined),
        )
        .map(([pv, raw, query, headers, body]) => buildRequest(op, pv, raw, query, headers, body)),
    );

// ---------------------------------------------------------------------------------------------------
// Sending and checking

async function send(ctx: Ctx, r: FuzzRequest): Promise<Observed> {
  const url = `${ctx.t.base}${r.path}`;
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(new Error(`no answer in 15 s: ${r.op.method} ${r.path.slice(0, 200)}`)), 15_000);
  try {
    const res = await fetch(url, { method: r.op.method, headers: r.headers, body: r.body, signal: ac.signal, redirect: 'manual' });
    const contentType = res.headers.get('content-type') ?? '';
    let text = '';
    if (contentType.startsWith('text/event-stream')) {
      // A live stream never ends by itself: the headers are what is checked.
      assert.is(res.status, 200, 'an event stream is only ever a 200');
      ac.abort();
    } else {
      text = await res.text();
    }
    let body: unknown;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      body = undefined;
    }
    const where = `${r.op.method} ${r.path.slice(0, 300)} body=${(r.body ?? '').slice(0, 200)} → ${res.status} ${text.slice(0, 300)}`;
    assert.ok(res.status < 500, `5xx: ${where}`);
    assertMatchesContract(r.op.method, new URL(url).pathname, { status: res.status, headers: res.headers, body, text });
    if (res.status >= 400) {
      assert.type((body as Json)?.error?.code, 'string', `envelope: ${where}`);
      assert.type((body as Json)?.error?.message, 'string', `envelope: ${where}`);
    }
    const observed = { status: res.status, code: (body as Json)?.error?.code, contentType };
    ctx.seen.push(observed);
    return observed;
  } finally {
    clearTimeout(timer);
  }
}

function assertNotPolluted(): void {
  const probe = {} as Json;
  assert.is(probe.polluted, undefined, 'Object.prototype was polluted');
  assert.is(Object.prototype.hasOwnProperty.call(Object.prototype, 'polluted'), false);
}

/** A POST /runs creates a run only when it is answered 202 (and not as a replay). */
async function sendCounting(ctx: Ctx, r: FuzzRequest): Promise<Observed> {
  if (r.op.id !== 'startRun') return send(ctx, r);
  const before = await countRuns(ctx.t);
  const o = await send(ctx, r);
  const after = await countRuns(ctx.t);
  if (o.status !== 202) assert.is(after, before, `a ${o.status} ${o.code} created a run: ${r.body?.slice(0, 300)}`);
  else assert.ok(after - before <= 1, 'one request made more than one run');
  assertNotPolluted();
  return o;
}

// ---------------------------------------------------------------------------------------------------
// Properties

s('random and mutated requests to every operation never get a 5xx and always match the document', async (ctx) => {
  await fc.assert(
    fc.asyncProperty(requestArb(ctx.ids), async (r) => {
      await sendCounting(ctx, r);
    }),
    { numRuns: 220 * SCALE, includeErrorInReport: true },
  );
  const ops = new Set(OPERATIONS.map((o) => o.id));
  assert.ok(ops.size >= 10, 'the document lists every operation');
  // The fuzz must have reached both sides of the validation, not just bounced off authentication.
  const statuses = new Set(ctx.seen.map((o) => o.status));
  assert.ok(statuses.has(200), `some requests succeed: ${[...statuses]}`);
  assert.ok([...statuses].filter((x) => x >= 400).length >= 3, `several error statuses: ${[...statuses]}`);
});

s('random POST /runs bodies never create a run unless accepted, never get a 5xx and never pollute prototypes', async (ctx) => {
  const startRun = OPERATIONS.find((o) => o.id === 'startRun')!;
  const codes = new Map<string, number>();
  await fc.assert(
    fc.asyncProperty(bodyArb(ctx.ids), fc.option(fc.oneof(nastyString, fc.uuid()), { nil: undefined }), async (body, idem) => {
      const r = buildRequest(
        startRun,
        [],
        false,
        [],
        { authorization: `Bearer ${FUZZ_KEY}`, 'content-type': 'application/json', 'idempotency-key': idem },
        body,
      );
      const o = await sendCounting(ctx, r);
      const k = `${o.status} ${o.code ?? ''}`.trim();
      codes.set(k, (codes.get(k) ?? 0) + 1);
    }),
    { numRuns: 180 * SCALE, includeErrorInReport: true },
  );
  // Both accepted and rejected bodies were generated, across several error codes.
  assert.ok(codes.has('202'), JSON.stringify([...codes]));
  for (const code of ['invalid_json', 'invalid_inputs', 'invalid_request'])
    assert.ok(
      [...codes.keys()].some((k) => k.endsWith(code)),
      `${code} reached: ${JSON.stringify([...codes])}`,
    );
});

s('bodies nested 10 000 deep, in every position and shape, are a 400 envelope and create no run', async (ctx) => {
  const startRun = OPERATIONS.find((o) => o.id === 'startRun')!;
  for (const kind of ['array', 'object', 'mixed'] as const) {
    const deep = nested(10_000, kind);
    for (const body of [
      deep,
      `{"workflow":"${W.typed}","inputs":{"n":1},"x":${deep}}`,
      `{"workflow":"${W.typed}","inputs":${deep}}`,
      `{"workflow":"${W.typed}","inputs":{"n":1,"data":${deep}}}`,
    ]) {
      const o = await sendCounting(
        ctx,
        buildRequest(startRun, [], false, [], { authorization: `Bearer ${FUZZ_KEY}`, 'content-type': 'application/json' }, body),
      );
      assert.is(o.status, 400, `${kind} ${body.slice(0, 60)}`);
    }
  }
  // Just inside the limit is still a normal request.
  const ok = await sendCounting(
    ctx,
    buildRequest(
      startRun,
      [],
      false,
      [],
      { authorization: `Bearer ${FUZZ_KEY}`, 'content-type': 'application/json' },
      `{"workflow":"${W.typed}","inputs":{"n":1,"data":${nested(60, 'mixed')}}}`,
    ),
  );
  assert.is(ok.status, 202);
});

s('strings Postgres cannot store (NUL, lone surrogates) anywhere in a request are a 4xx, not a 5xx', async (ctx) => {
  const startRun = OPERATIONS.find((o) => o.id === 'startRun')!;
  const bodies = [
    `{"workflow":"${W.typed}","inputs":{"n":1,"title":"a\\u0000b"}}`,
    `{"workflow":"${W.typed}","inputs":{"n":1,"data":{"k\\u0000":1}}}`,
    `{"workflow":"${W.typed}","inputs":{"n":1,"body":"x\\ud800y"}}`,
    `{"workflow":"${W.typed}","inputs":{"n":1,"body":"\\udc00"}}`,
    `{"workflow":"${W.typed}","inputs":{"n":1},"idempotencyKey":"a\\u0000"}`,
    `{"workflow":"${W.typed}\\u0000","inputs":{"n":1}}`,
  ];
  for (const body of bodies) {
    const o = await sendCounting(ctx, buildRequest(startRun, [], false, [], { authorization: `Bearer ${FUZZ_KEY}`, 'content-type': 'application/json' }, body));
    assert.ok(o.status === 400 || o.status === 404, `${body} → ${o.status}`);
  }
  // A well-formed surrogate pair (an emoji) is fine.
  const pair = await sendCounting(
    ctx,
    buildRequest(
      startRun,
      [],
      false,
      [],
      { authorization: `Bearer ${FUZZ_KEY}`, 'content-type': 'application/json' },
      `{"workflow":"${W.typed}","inputs":{"n":1,"title":"\\ud83d\\ude00"}}`,
    ),
  );
  assert.is(pair.status, 202);
  for (const q of ['q=%00', 'q=a%00b', 'runModel=%00', 'access=%00', 'offset=%00']) {
    const bad = await ctx.t.call('GET', `/workflows?${q}`, { key: FUZZ_KEY });
    assert.is(bad.status, 400, q);
    assert.is(bad.body.error.code, 'invalid_request', q);
    if (q.startsWith('q=')) assert.is(bad.body.error.message, 'q must not contain NUL characters', q);
  }
  for (const q of ['status=%00', 'workflow=%00', 'offset=%00']) {
    const bad = await ctx.t.call('GET', `/runs?${q}`, { key: FUZZ_KEY });
    assert.is(bad.status, 400, q);
  }
});

s('malformed percent-escapes in path ids are answered 404 on every id route', async (ctx) => {
  for (const op of OPERATIONS.filter((o) => o.pathParams.length)) {
    for (const bad of ['%E0%A4%A', '%', '%zz', '%C0%AF']) {
      const path = op.template.replace(/\{[^}]+\}/g, bad);
      const o = await send(ctx, { op, path, headers: { authorization: `Bearer ${FUZZ_KEY}` } });
      assert.is(o.status, 404, `${op.method} ${path}`);
      assert.is(o.code, 'not_found');
    }
  }
});

s('garbage on a raw socket gets an error envelope or a closed connection, and the server stays up', async (ctx) => {
  const { hostname, port } = new URL(ctx.t.url);
  const rawExchange = (bytes: Buffer) =>
    new Promise<string>((resolveText) => {
      const sock = net.connect(Number(port), hostname, () => sock.end(bytes));
      let buf = '';
      const done = () => resolveText(buf);
      sock.on('data', (d) => (buf += d.toString('latin1')));
      sock.on('close', done);
      sock.on('error', done);
      sock.setTimeout(3000, () => sock.destroy());
    });
  const requestLine = fc.oneof(
    fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b)),
    fc
      .tuple(
        fc.constantFrom('GET', 'POST', 'BREW', 'G\u0000T', ''),
        fc.oneof(
          fc.constantFrom('http://[', 'http://a b/', '/v1/runs', '*', '//x', '/v1/%', 'http://x:99999/v1/runs'),
          fc.string({ unit: 'binary', maxLength: 30 }),
        ),
        fc.constantFrom('HTTP/1.1', 'HTTP/1.0', 'HTTP/9.9', ''),
      )
      .map(([m, target, v]) => Buffer.from(`${m} ${target} ${v}\r\nHost: x\r\nAuthorization: Bearer ${FUZZ_KEY}\r\nConnection: close\r\n\r\n`, 'utf8')),
  );
  await fc.assert(
    fc.asyncProperty(requestLine, async (bytes) => {
      const text = await rawExchange(bytes);
      if (!text) return; // closed without an answer: acceptable for bytes that are not HTTP at all
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(text);
      assert.ok(m, `not an HTTP answer: ${JSON.stringify(text.slice(0, 200))}`);
      assert.ok(Number(m![1]) < 500, `5xx for ${JSON.stringify(bytes.toString('latin1').slice(0, 100))}: ${text.slice(0, 300)}`);
      assert.match(text, /\r\nx-request-id: /i);
      const body = text.slice(text.indexOf('\r\n\r\n') + 4);
      if (Number(m![1]) >= 400) assert.type(JSON.parse(body).error.code, 'string');
    }),
    { numRuns: 60 * SCALE, includeErrorInReport: true },
  );
  const health = await fetch(`${ctx.t.url}/healthz`);
  assert.is(health.status, 200);
});

s('after all of it the service is healthy and every stored run belongs to an accepted request', async (ctx) => {
  const res = await fetch(`${ctx.t.url}/readyz`);
  assert.is(res.status, 200);
  const rows = await ctx.t.deps.orm.em
    .fork()
    .execute<{ n: number }[]>(
      `select count(*)::int as n from runs r where not exists (select 1 from run_events e where e.run_id = r.id and e.type = 'run.queued')`,
    );
  assert.is(Number(rows[0]!.n), 0, 'every run row was committed with its run.queued event');
  assert.ok(ctx.seen.length >= 400, `requests sent: ${ctx.seen.length}`);
});

s.run();
