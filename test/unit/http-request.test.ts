import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { HttpNode } from '../../src/domain/graph/types.ts';
import { executeHttpRequest, HTTP_MAX_RESPONSE_BYTES } from '../../src/engine/nodes/http-request.ts';
import type { NodeExecutionContext, NodeOutcome } from '../../src/engine/nodes/types.ts';
import { assertPublicUrl } from '../../src/security/net-guard.ts';

interface Seen {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

interface LocalServer {
  url: string;
  origin: string;
  port: number;
  seen: Seen[];
  close(): Promise<void>;
}

/** A local server on 127.0.0.1 whose routes are plain handlers; it records every request. */
async function serve(routes: Record<string, (req: http.IncomingMessage, res: http.ServerResponse, body: string) => void>): Promise<LocalServer> {
  const seen: Seen[] = [];
  const server = http.createServer(async (req, res) => {
    const parts: Buffer[] = [];
    for await (const p of req) parts.push(p as Buffer);
    const body = Buffer.concat(parts).toString('utf8');
    const path = req.url ?? '/';
    seen.push({ method: req.method ?? '', path, headers: req.headers, body });
    const route = routes[path.split('?')[0]!];
    if (route) route(req, res, body);
    else res.writeHead(404).end('not here');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  const origin = `http://127.0.0.1:${port}`;
  return {
    url: origin,
    origin,
    port,
    seen,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

function context(node: Omit<HttpNode, 'id' | 'kind'>, o: { allowPrivateNetwork?: boolean; signal?: AbortSignal; values?: Record<string, string> } = {}) {
  const deltas: string[] = [];
  const values = o.values ?? {};
  const ctx: NodeExecutionContext = {
    runId: 'run-1',
    node: { id: 'call', kind: 'http.request', ...node },
    render: (t) => t.replace(/\{\{(\w+)\}\}/g, (_, k: string) => values[k] ?? ''),
    credentialMode: 'service_hosted',
    providers: { openai: {}, anthropic: {}, google: {}, azure_openai: {}, vertex: {}, openrouter: {} },
    allowPrivateNetwork: o.allowPrivateNetwork ?? true,
    onDelta: (t) => void deltas.push(t),
    signal: o.signal ?? new AbortController().signal,
  };
  return Object.assign(ctx, { deltas });
}

function reasonOf(out: NodeOutcome): string {
  if (out.status !== 'failed') assert.unreachable(`expected failed, got ${JSON.stringify(out).slice(0, 200)}`);
  return (out as { reason: string }).reason;
}

const BLOCKED = /private or reserved network address/;

test('a GET renders the URL and header templates and returns the body as one delta', async () => {
  const s = await serve({ '/items': (_req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('item list') });
  try {
    const ctx = context(
      { url: `${s.url}/items?q={{q}}`, headers: { Authorization: 'Bearer {{token}}', 'X-Trace': 'fixed' } },
      { values: { q: 'shoes', token: 'tok-123' } },
    );
    const out = await executeHttpRequest(ctx);
    assert.equal(out, { status: 'completed', value: 'item list' });
    assert.equal(ctx.deltas, ['item list']);
    assert.is(s.seen.length, 1);
    assert.is(s.seen[0]!.method, 'GET');
    assert.is(s.seen[0]!.path, '/items?q=shoes');
    assert.is(s.seen[0]!.headers.authorization, 'Bearer tok-123');
    assert.is(s.seen[0]!.headers['x-trace'], 'fixed');
  } finally {
    await s.close();
  }
});

test('a POST sends the rendered body and the method is case-insensitive', async () => {
  const s = await serve({ '/echo': (req, res, body) => res.writeHead(201).end(`${req.method} ${req.headers['content-type']} ${body}`) });
  try {
    const ctx = context(
      { method: 'post', url: `${s.url}/echo`, headers: { 'Content-Type': 'application/json' }, body: '{"name":"{{name}}"}' },
      { values: { name: 'Ada' } },
    );
    const out = await executeHttpRequest(ctx);
    assert.equal(out, { status: 'completed', value: 'POST application/json {"name":"Ada"}' });
    assert.is(s.seen[0]!.body, '{"name":"Ada"}');
  } finally {
    await s.close();
  }
});

test('an empty 2xx body completes with an empty string and no delta', async () => {
  const s = await serve({ '/empty': (_req, res) => res.writeHead(204).end() });
  try {
    const ctx = context({ url: `${s.url}/empty` });
    assert.equal(await executeHttpRequest(ctx), { status: 'completed', value: '' });
    assert.equal(ctx.deltas, []);
  } finally {
    await s.close();
  }
});

test('a non-2xx answer fails the node with its status and no delta', async () => {
  const s = await serve({ '/boom': (_req, res) => res.writeHead(500).end('stack trace with secrets') });
  try {
    const ctx404 = context({ url: `${s.url}/missing` });
    assert.is(reasonOf(await executeHttpRequest(ctx404)), 'the HTTP request failed with status 404');
    const ctx500 = context({ url: `${s.url}/boom` });
    const out = await executeHttpRequest(ctx500);
    assert.is(reasonOf(out), 'the HTTP request failed with status 500');
    assert.not.ok(JSON.stringify(out).includes('secrets'));
    assert.equal(ctx500.deltas, []);
  } finally {
    await s.close();
  }
});

test('a streamed response over 1 MiB fails while exactly 1 MiB is accepted', async () => {
  const chunk = Buffer.alloc(64 * 1024, 'a');
  const stream = (total: number) => (_req: http.IncomingMessage, res: http.ServerResponse) => {
    res.writeHead(200, { 'content-type': 'text/plain' }); // chunked: no content-length to trust
    let left = total;
    const pump = () => {
      while (left > 0) {
        const n = Math.min(left, chunk.length);
        left -= n;
        if (!res.write(chunk.subarray(0, n))) return void res.once('drain', pump);
      }
      res.end();
    };
    pump();
  };
  const s = await serve({ '/exact': stream(HTTP_MAX_RESPONSE_BYTES), '/over': stream(HTTP_MAX_RESPONSE_BYTES + 1), '/huge': stream(50 * 1024 * 1024) });
  try {
    const ok = await executeHttpRequest(context({ url: `${s.url}/exact` }));
    assert.is(ok.status, 'completed');
    assert.is((ok as { value: string }).value.length, HTTP_MAX_RESPONSE_BYTES);
    assert.is(reasonOf(await executeHttpRequest(context({ url: `${s.url}/over` }))), 'the HTTP response exceeded the 1 MiB size limit');
    const ctx = context({ url: `${s.url}/huge` });
    assert.is(reasonOf(await executeHttpRequest(ctx)), 'the HTTP response exceeded the 1 MiB size limit');
    assert.equal(ctx.deltas, []);
  } finally {
    await s.close();
  }
});

test('a declared content-length over 1 MiB fails before the body is read', async () => {
  const s = await serve({
    '/declared': (_req, res) => {
      res.writeHead(200, { 'content-length': String(HTTP_MAX_RESPONSE_BYTES + 10) });
      res.write('x'); // never finishes: only the header can end this quickly
    },
  });
  try {
    assert.is(reasonOf(await executeHttpRequest(context({ url: `${s.url}/declared` }))), 'the HTTP response exceeded the 1 MiB size limit');
  } finally {
    await s.close();
  }
});

test('redirects are followed, and a 303 after a POST continues as a GET without the body', async () => {
  const s = await serve({
    '/submit': (_req, res) => res.writeHead(303, { location: '/hop' }).end(),
    '/hop': (_req, res) => res.writeHead(302, { location: `/done` }).end(),
    '/done': (req, res, body) => res.writeHead(200).end(`${req.method} body=${JSON.stringify(body)} ct=${req.headers['content-type'] ?? 'none'}`),
  });
  try {
    const out = await executeHttpRequest(context({ method: 'POST', url: `${s.url}/submit`, headers: { 'content-type': 'text/plain' }, body: 'payload' }));
    assert.equal(out, { status: 'completed', value: 'GET body="" ct=none' });
    assert.equal(
      s.seen.map((r) => `${r.method} ${r.path}`),
      ['POST /submit', 'GET /hop', 'GET /done'],
    );
  } finally {
    await s.close();
  }
});

test('a 307 keeps the method and body', async () => {
  const s = await serve({
    '/a': (_req, res) => res.writeHead(307, { location: '/b' }).end(),
    '/b': (req, res, body) => res.writeHead(200).end(`${req.method} ${body}`),
  });
  try {
    assert.equal(await executeHttpRequest(context({ method: 'PUT', url: `${s.url}/a`, body: 'v2' })), { status: 'completed', value: 'PUT v2' });
  } finally {
    await s.close();
  }
});

test('more than five redirects fail the node', async () => {
  const s = await serve({ '/loop': (req, res) => res.writeHead(302, { location: `/loop?n=${(s?.seen.length ?? 0) + 1}` }).end() });
  try {
    const out = await executeHttpRequest(context({ url: `${s.url}/loop` }));
    assert.is(reasonOf(out), 'the HTTP request was redirected more than 5 times');
    assert.is(s.seen.length, 6, 'the original request plus five followed redirects');
  } finally {
    await s.close();
  }
});

test('a cross-origin redirect drops the Authorization and Cookie headers; a same-origin one keeps them', async () => {
  const other = await serve({
    '/landing': (req, res) =>
      res.writeHead(200).end(`auth=${req.headers.authorization ?? 'none'} cookie=${req.headers.cookie ?? 'none'} x=${req.headers['x-keep']}`),
  });
  const s = await serve({
    '/away': (_req, res) => res.writeHead(302, { location: `${other.url}/landing` }).end(),
    '/here': (_req, res) => res.writeHead(302, { location: `/landing` }).end(),
    '/landing': (req, res) => res.writeHead(200).end(`auth=${req.headers.authorization ?? 'none'}`),
  });
  try {
    const headers = { Authorization: 'Bearer {{secret}}', Cookie: 'sid=1', 'X-Keep': 'yes' };
    const values = { secret: 'pw-123' };
    assert.equal(await executeHttpRequest(context({ url: `${s.url}/away`, headers }, { values })), {
      status: 'completed',
      value: 'auth=none cookie=none x=yes',
    });
    assert.equal(await executeHttpRequest(context({ url: `${s.url}/here`, headers }, { values })), { status: 'completed', value: 'auth=Bearer pw-123' });
  } finally {
    await s.close();
    await other.close();
  }
});

test('loopback is blocked by default and the server never sees the request', async () => {
  const s = await serve({ '/': (_req, res) => res.writeHead(200).end('secret admin page') });
  try {
    for (const url of [s.url, `http://localhost:${s.port}/`, `http://[::1]:${s.port}/`, `http://2130706433:${s.port}/`, `http://0x7f.1:${s.port}/`]) {
      const out = await executeHttpRequest(context({ url }, { allowPrivateNetwork: false }));
      assert.match(reasonOf(out), BLOCKED, url);
    }
    assert.is(s.seen.length, 0);
  } finally {
    await s.close();
  }
});

test('a redirect to a private address is blocked when private networks are not allowed', async () => {
  // The first hop is the local test server, let through by a pre-check that trusts only its origin;
  // every redirect target goes through the real guard.
  const targets = ['http://169.254.169.254/latest/meta-data/', 'http://10.0.0.5/', 'http://[::ffff:127.0.0.1]/', 'http://localhost:1/', 'http://192.168.1.1/'];
  const s = await serve({
    '/start': (req, res) => res.writeHead(302, { location: targets[Number(new URL(req.url!, 'http://x').searchParams.get('i'))]! }).end(),
  });
  try {
    const assertUrl = async (url: string) => {
      if (new URL(url).origin === s.origin) return;
      await assertPublicUrl(url, { allowPrivateNetwork: false });
    };
    for (let i = 0; i < targets.length; i++) {
      const out = await executeHttpRequest(context({ url: `${s.url}/start?i=${i}` }, { allowPrivateNetwork: false }), { assertUrl });
      assert.match(reasonOf(out), BLOCKED, targets[i]);
    }
    assert.is(s.seen.length, targets.length);
  } finally {
    await s.close();
  }
});

test('the connect-time lookup blocks a name that resolves privately even when the pre-check is skipped (DNS rebinding)', async () => {
  const s = await serve({ '/': (_req, res) => res.writeHead(200).end('internal') });
  try {
    const out = await executeHttpRequest(context({ url: `http://localhost:${s.port}/` }, { allowPrivateNetwork: false }), { assertUrl: async () => {} });
    assert.match(reasonOf(out), BLOCKED);
    assert.is(s.seen.length, 0);
  } finally {
    await s.close();
  }
});

test('ALLOW_PRIVATE_NETWORK lets a redirect reach another local address', async () => {
  const s = await serve({
    '/go': (_req, res) => res.writeHead(301, { location: `http://localhost:${s.port}/there` }).end(),
    '/there': (_req, res) => res.writeHead(200).end('arrived'),
  });
  try {
    assert.equal(await executeHttpRequest(context({ url: `${s.url}/go` }, { allowPrivateNetwork: true })), { status: 'completed', value: 'arrived' });
  } finally {
    await s.close();
  }
});

test('only http and https URLs are accepted, even with private networks allowed', async () => {
  for (const url of ['file:///etc/passwd', 'ftp://127.0.0.1/x', 'gopher://127.0.0.1:70/', 'javascript:alert(1)']) {
    assert.is(reasonOf(await executeHttpRequest(context({ url }, { allowPrivateNetwork: true }))), 'only http and https URLs are allowed', url);
  }
  assert.is(reasonOf(await executeHttpRequest(context({ url: 'not a url' }))), 'the URL is not a valid absolute URL');
});

test('a redirect to a non-http scheme is refused', async () => {
  const s = await serve({ '/r': (_req, res) => res.writeHead(302, { location: 'file:///etc/passwd' }).end() });
  try {
    assert.match(reasonOf(await executeHttpRequest(context({ url: `${s.url}/r` }))), /redirected to a URL that is not allowed: only http and https/);
  } finally {
    await s.close();
  }
});

test('header values that would inject a new header line are refused', async () => {
  const s = await serve({ '/': (_req, res) => res.writeHead(200).end('ok') });
  try {
    const out = await executeHttpRequest(context({ url: s.url, headers: { 'X-Name': '{{name}}' } }, { values: { name: 'a\r\nX-Admin: 1' } }));
    assert.is(reasonOf(out), 'the request headers are not valid');
    assert.is(s.seen.length, 0);
  } finally {
    await s.close();
  }
});

test('a GET with a body and an unknown method are refused', async () => {
  assert.is(reasonOf(await executeHttpRequest(context({ url: 'http://127.0.0.1:9/', body: 'x' }))), 'a GET request cannot have a body');
  assert.match(reasonOf(await executeHttpRequest(context({ method: 'CONNECT', url: 'http://127.0.0.1:9/' }))), /HTTP method "CONNECT" is not supported/);
});

test('a server that does not answer in time fails the node with a timeout reason', async () => {
  const s = await serve({ '/slow': () => {} });
  try {
    const out = await executeHttpRequest(context({ url: `${s.url}/slow` }), { timeoutMs: 150 });
    assert.is(reasonOf(out), 'the HTTP request timed out after 0.15 seconds');
  } finally {
    await s.close();
  }
});

test('cancelling the node mid-request rejects with an AbortError', async () => {
  const s = await serve({ '/slow': (_req, res) => void res.writeHead(200).write('partial') });
  try {
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 100);
    try {
      const out = await executeHttpRequest(context({ url: `${s.url}/slow` }, { signal: ac.signal }));
      assert.unreachable(`expected a rejection, got ${JSON.stringify(out)}`);
    } catch (e) {
      if (e instanceof assert.Assertion) throw e;
      assert.is((e as Error).name, 'AbortError');
    }
  } finally {
    await s.close();
  }
});

test('a refused connection fails with a generic reason', async () => {
  const s = await serve({});
  const url = s.url;
  await s.close();
  assert.is(reasonOf(await executeHttpRequest(context({ url }))), 'the HTTP request could not be completed (connection failed)');
});

test.run();
