import { connect } from 'node:net';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { assertMatchesContract } from '../helpers/openapi-contract.ts';

/**
 * Bounded request life (docs/design/rules.md, "Request bodies"): a body that stalls is answered 408 and
 * its connection closed within HTTP_BODY_TIMEOUT_MS, counted nowhere; one key's bodies on their way are
 * bounded (429 `rate_limited` at once for one more); slow headers are 408; SSE streams, `Prefer: wait`
 * and idle keep-alive connections are not cut by these clocks. Raw sockets, as a slow client sends.
 */

const W_SUMMARY = 'aaaaaaaa-0000-4000-8000-000000000001';
const TOKEN = 'test-internal-token-123456';
const BODY_TIMEOUT_MS = 1000;
const HEADERS_TIMEOUT_MS = 500;
const LIMITS = { HTTP_BODY_TIMEOUT_MS: String(BODY_TIMEOUT_MS), HTTP_HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS), SSE_HEARTBEAT_MS: '200' };

interface Answer {
  status: number;
  text: string;
  /** From the connection's open to its close. */
  ms: number;
}

/** Sends `head` (and nothing after it) on a new connection; resolves when the server closes it. */
function stall(app: TestApp, head: string): Promise<Answer> {
  const { port } = new URL(app.url);
  return new Promise((resolve, reject) => {
    const at = Date.now();
    let text = '';
    const socket = connect(Number(port), '127.0.0.1', () => socket.write(head));
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (text += chunk));
    socket.on('error', reject);
    socket.on('close', () => resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), text, ms: Date.now() - at }));
  });
}

/** The headers of a POST with a 9-byte body, and its first byte only. */
const stalledPost = (path: string, auth: string) =>
  `POST ${path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${auth}\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n{`;
const stalledRun = (key = 'wr_test_bob') => stalledPost('/v1/runs', key);

async function withApp(env: Record<string, string>, fn: (app: TestApp) => Promise<void>): Promise<void> {
  const app = await startTestApp({ env: { ...LIMITS, ...env } });
  try {
    await fn(app);
  } finally {
    await app.close();
  }
}

const envelope = (a: Answer) => JSON.parse(a.text.slice(a.text.indexOf('\r\n\r\n') + 4));

/** The raw answer checked against the document's response for `method path` and its status. */
function assertDocumented(method: string, path: string, a: Answer): void {
  const cut = a.text.indexOf('\r\n\r\n');
  const headers = new Headers(
    a.text
      .slice(0, cut)
      .split('\r\n')
      .slice(1)
      .map((line) => line.split(/:\s*/, 2) as [string, string]),
  );
  assertMatchesContract(method, path, { status: a.status, headers, text: a.text.slice(cut + 4), body: envelope(a) });
}

test('500 stalled POST /runs bodies are each answered 408 and closed within the body timeout, counted nowhere, while GET /workflows stays fast', async () => {
  const timeoutMs = 3000;
  await withApp({ MAX_BODIES_IN_FLIGHT_PER_KEY: '1000', HTTP_BODY_TIMEOUT_MS: String(timeoutMs) }, async (app) => {
    let closed = 0;
    const stalled = Array.from({ length: 500 }, () => stall(app, stalledRun()).finally(() => closed++));
    // GET /workflows every 100 ms while they are held (the first ones wait behind the 500 requests' own handling).
    const lists: number[] = [];
    while (closed === 0) {
      await new Promise((r) => setTimeout(r, 100));
      const at = Date.now();
      assert.is((await app.call('GET', '/workflows')).status, 200);
      lists.push(Date.now() - at);
    }
    const answers = await Promise.all(stalled);
    const slowest = Math.max(...answers.map((a) => a.ms));
    const held = lists.slice(Math.floor(lists.length / 2)).sort((a, b) => a - b);
    const median = held[Math.floor(held.length / 2)]!;
    console.log(`  500 stalled bodies (timeout ${timeoutMs} ms): slowest closed after ${slowest} ms; GET /workflows beside them: ${lists.join(', ')} ms`);
    assertDocumented('POST', '/v1/runs', answers[0]!);
    for (const a of answers) {
      assert.is(a.status, 408, a.text);
      assert.is(envelope(a).error.code, 'invalid_request');
      assert.match(a.text, /\r\nConnection: close\r\n/i);
    }
    // Measured from the client's connect: the margin is the time the service takes to accept and route 500 requests at once.
    assert.ok(slowest < timeoutMs + 3000, `a stalled body was held ${slowest} ms`);
    assert.ok(median < 250, `GET /workflows took ${median} ms (median of the later half) beside 500 stalled bodies`);
    // Not one of them reached the rate window or made a run.
    const run = await app.call('POST', '/runs', { body: { workflow: W_SUMMARY, inputs: { topic: 'after' } } });
    assert.is(run.status, 202, run.text);
    assert.is(run.headers.get('ratelimit-remaining'), String(Number(run.headers.get('ratelimit-limit')) - 1));
    assert.is((await app.call('GET', '/runs')).body.runs.length, 1);
  });
});

test('one key holds at most MAX_BODIES_IN_FLIGHT_PER_KEY bodies on their way: one more is 429 rate_limited at once and closed; other keys are not held up', async () => {
  await withApp({ MAX_BODIES_IN_FLIGHT_PER_KEY: '3' }, async (app) => {
    const held = [0, 1, 2].map(() => stall(app, stalledRun()));
    await new Promise((r) => setTimeout(r, 200));
    const [over, other] = await Promise.all([stall(app, stalledRun()), stall(app, stalledRun('wr_test_alice')).then((a) => a)]);
    assert.is(over.status, 429, over.text);
    assert.is(envelope(over).error.code, 'rate_limited');
    assertDocumented('POST', '/v1/runs', over);
    assert.match(over.text, /\r\nRetry-After: 1\r\n/i);
    assert.ok(over.ms < BODY_TIMEOUT_MS / 2, `the refusal took ${over.ms} ms`);
    assert.is(other.status, 408, 'another key has places of its own');
    for (const a of await Promise.all(held)) assert.is(a.status, 408);
    // The places are given back: the window counted none of them, and a body of this key is read again.
    const run = await app.call('POST', '/runs', { body: { workflow: W_SUMMARY, inputs: { topic: 'after' } } });
    assert.is(run.status, 202, run.text);
    assert.is(run.headers.get('ratelimit-remaining'), String(Number(run.headers.get('ratelimit-limit')) - 1));
  });
});

test('a stalled POST /graphql with the token is 408 within the body timeout; the token has the same bound', async () => {
  await withApp({ MAX_BODIES_IN_FLIGHT_PER_KEY: '2' }, async (app) => {
    const held = [0, 1].map(() => stall(app, stalledPost('/graphql', TOKEN)));
    await new Promise((r) => setTimeout(r, 200));
    const over = await stall(app, stalledPost('/graphql', TOKEN));
    assert.is(over.status, 429, over.text);
    for (const a of await Promise.all(held)) {
      assert.is(a.status, 408, a.text);
      assert.ok(a.ms < BODY_TIMEOUT_MS + 1500, `held ${a.ms} ms`);
    }
    const stream = await stall(app, stalledPost('/graphql/stream', TOKEN).replace('\r\n\r\n', '\r\nAccept: text/event-stream\r\n\r\n'));
    assert.is(stream.status, 408, stream.text);
  });
});

test('headers that do not arrive within HTTP_HEADERS_TIMEOUT_MS are 408, and headers over 16 KB 431, in the envelope the document gives', async () => {
  await withApp({}, async (app) => {
    const a = await stall(app, 'GET /v1/workflows HTTP/1.1\r\nHost: localhost\r\n');
    assert.is(a.status, 408, a.text);
    assert.is(envelope(a).error.code, 'invalid_request');
    assert.ok(a.ms >= HEADERS_TIMEOUT_MS && a.ms < HEADERS_TIMEOUT_MS + 1500, `answered after ${a.ms} ms`);
    assertDocumented('GET', '/v1/workflows', a);
    const large = await stall(app, `GET /v1/runs/${W_SUMMARY} HTTP/1.1\r\nHost: localhost\r\nX-Padding: ${'x'.repeat(17 * 1024)}\r\n\r\n`);
    assert.is(large.status, 431, large.text);
    assertDocumented('GET', `/v1/runs/${W_SUMMARY}`, large);
  });
});

test('an SSE stream and a Prefer: wait answer outlive every timeout; an idle keep-alive connection is kept for HTTP_KEEP_ALIVE_TIMEOUT_MS', async () => {
  await withApp({ HTTP_KEEP_ALIVE_TIMEOUT_MS: '3000' }, async (app) => {
    const run = await app.call('POST', '/runs', { body: { workflow: W_SUMMARY, inputs: { topic: 'long' } } });
    assert.is(run.status, 202);
    assert.match(run.headers.get('keep-alive') ?? '', /timeout=3\b/);
    // The test app's engine never runs it: the stream stays open and the wait runs to its end.
    const head = `GET /v1/runs/${run.body.run.id}/stream HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer wr_test_bob\r\n\r\n`;
    const { port } = new URL(app.url);
    const socket = connect(Number(port), '127.0.0.1', () => socket.write(head));
    let streamed = '';
    socket.on('data', (c: Buffer) => (streamed += c.toString()));
    const waited = app.call('POST', '/runs', { body: { workflow: W_SUMMARY, inputs: { topic: 'wait' } }, headers: { prefer: 'wait=3' } });
    await new Promise((r) => setTimeout(r, 3 * BODY_TIMEOUT_MS));
    assert.ok(!socket.destroyed && socket.readyState === 'open', 'the stream is open');
    assert.ok((streamed.match(/: heartbeat/g) ?? []).length >= 5, 'heartbeats kept coming');
    socket.destroy();
    assert.is((await waited).status, 202, 'the wait ran to its end');
    // A keep-alive connection idle for less than the timeout serves its next request.
    const idle = await new Promise<string>((resolve, reject) => {
      let text = '';
      const s = connect(Number(port), '127.0.0.1', () => s.write('GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n'));
      s.on('data', (c: Buffer) => {
        text += c.toString();
        if ((text.match(/HTTP\/1\.1 200/g) ?? []).length === 1 && text.endsWith('}')) {
          setTimeout(() => s.write('GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n'), 2000);
        }
        if ((text.match(/HTTP\/1\.1 200/g) ?? []).length === 2 && text.endsWith('}')) s.end();
      });
      s.on('error', reject);
      s.on('close', () => resolve(text));
    });
    assert.is((idle.match(/HTTP\/1\.1 200/g) ?? []).length, 2, idle);
  });
});

test.run();
