import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  ApiError,
  ConnectionError,
  verifyWebhook,
  WebhookVerificationError,
  WorkflowRunClient,
  type RunEvent,
  type RunStreamItem,
} from '../../src/client/src/index.ts';
import { startProviderStub, type ProviderStub } from '../helpers/provider-stub.ts';
import { W_DELAY, W_LIMIT, W_LONG_DELAY, W_STORY, W_SUMMARY } from '../rest/e2e/helpers/catalog.ts';
import { assertLogSound, openaiEnv, runEvents, settle, startE2e, WEBHOOK_SECRET, type E2e } from '../rest/e2e/helpers/harness.ts';
import { startFaultProxy, type Fault, type FaultProxy, type SeenRequest } from './helpers/fault-proxy.ts';

/**
 * The typed client (src/client) against the real service over real HTTP and SSE (embedded engine, the
 * REST e2e catalog, a local provider stub for the LLM step), with a fault-injecting proxy in between
 * where the network has to misbehave: a 429, a lost response, a stream cut in the middle of a frame.
 */

const CHUNKS = Array.from({ length: 12 }, (_, i) => `word${i} `);
let stub: ProviderStub;
let e: E2e;
let proxy: FaultProxy;
const client = (base = proxy.base, key = 'wr_test_bob') => new WorkflowRunClient({ apiKey: key, baseUrl: base, retryBaseMs: 50 });

test.before(async () => {
  stub = await startProviderStub({ chunks: CHUNKS, delayMsBetweenChunks: 40 });
  e = await startE2e({ name: 'embedded', timeoutMs: 20_000 }, { env: openaiEnv(stub) });
  proxy = await startFaultProxy(e.t.base);
});
test.after(async () => {
  await proxy?.close();
  await e?.close();
  await stub?.close();
});
test.before.each(() => {
  proxy.plan = () => ({ kind: 'forward' });
  proxy.requests.length = 0;
});

const runsOf = async (workflow: string) => (await client().listRuns({ workflow, limit: 50 })).runs.map((r) => r.id);
const posts = () => proxy.requests.filter((r) => r.method === 'POST' && r.path === '/v1/runs');

test('startRun sends a generated Idempotency-Key; waitForRun polls until the run completes with its outputs and charge', async () => {
  const c = client();
  const started = await c.startRun(W_SUMMARY, { inputs: { topic: 'owls' } });
  assert.match(started.idempotencyKey, /^[0-9a-f-]{36}$/);
  assert.is(posts()[0]!.headers['idempotency-key'], started.idempotencyKey);
  assert.is(started.replayed, false);
  const run = await c.waitForRun(started.id, { timeoutMs: 20_000 });
  assert.is(run.status, 'completed');
  assert.equal(
    run.outputs.map((o) => o.value),
    ['About owls'],
  );
  assert.is(run.billingStatus, 'settled');
  const again = await c.startRun(W_SUMMARY, { inputs: { topic: 'owls' }, idempotencyKey: started.idempotencyKey });
  assert.is(again.id, started.id, 'the same key replays the same run');
  assert.is(again.replayed, true);
});

test('startRun retries a 429 after its Retry-After with the same key, and a lost response with the same key: one run is created', async () => {
  const before = await runsOf(W_DELAY);
  let n = 0;
  proxy.plan = (r) => {
    if (r.method !== 'POST' || r.path !== '/v1/runs') return { kind: 'forward' };
    n++;
    if (n === 1) return { kind: 'respond', status: 429, headers: { 'retry-after': '1' }, body: { error: { code: 'rate_limited', message: 'slow down' } } };
    // The service creates the run, but its answer never arrives.
    if (n === 2) return { kind: 'lose-response' };
    return { kind: 'forward' };
  };
  const t0 = Date.now();
  const started = await client().startRun(W_DELAY);
  assert.ok(Date.now() - t0 >= 1000, 'waited for Retry-After');
  const keys = posts().map((r) => r.headers['idempotency-key']);
  assert.is(keys.length, 3);
  assert.equal(new Set(keys).size, 1, `one key on every attempt: ${keys.join(', ')}`);
  assert.is(started.replayed, true, 'the third attempt got the run the second one created');
  const created = (await runsOf(W_DELAY)).filter((id) => !before.includes(id));
  assert.equal(created, [started.id], 'exactly one run');
  await settle(e, started.id);
});

test('startRun gives up after its bounded attempts and throws the ApiError', async () => {
  proxy.plan = (r) =>
    r.method === 'POST'
      ? { kind: 'respond', status: 503, headers: { 'x-request-id': 'req-503' }, body: { error: { code: 'internal_error', message: 'down' } } }
      : { kind: 'forward' };
  const c = new WorkflowRunClient({ apiKey: 'wr_test_bob', baseUrl: proxy.base, maxAttempts: 3, retryBaseMs: 10 });
  const err = await c.startRun(W_DELAY).catch((x) => x);
  assert.instance(err, ApiError);
  assert.is(err.status, 503);
  assert.is(err.requestId, 'req-503');
  assert.is(posts().length, 3);
});

/** Follows a stream to its end, recording every item. */
async function follow(c: WorkflowRunClient, id: string) {
  const stream = c.streamRun(id);
  const items: RunStreamItem[] = [];
  for await (const item of stream) items.push(item);
  const events = items.filter((i): i is Extract<RunStreamItem, { type: 'event' }> => i.type === 'event').map((i) => i.event);
  return { stream, items, events };
}

function assertExactlyTheLog(events: RunEvent[], log: RunEvent[]): void {
  assertLogSound(log as never);
  assert.equal(
    events.map((ev) => ev.sequence),
    log.map((ev) => ev.sequence),
    'every event once, in order: no duplicate, no gap',
  );
  assert.equal(events, log);
}

test('streamRun resumes with Last-Event-ID after the connection is cut mid-frame, twice: no event repeated or skipped, the LLM text rebuilt', async () => {
  let streams = 0;
  proxy.plan = (r) => {
    if (!r.path.includes('/stream')) return { kind: 'forward' };
    streams++;
    // Cut during the delay (after run.started …), then again among the LLM's deltas.
    if (streams === 1) return { kind: 'cut-stream', afterEvents: 4 };
    if (streams === 2) return { kind: 'cut-stream', afterEvents: 3 };
    return { kind: 'forward' };
  };
  const c = client();
  const { id } = await c.startRun(W_STORY);
  const { stream, items, events } = await follow(c, id);
  const opens = proxy.requests.filter((r) => r.path.includes('/stream'));
  assert.ok(stream.connections >= 3, `reconnected (${stream.connections} connections)`);
  assert.is(opens[0]!.headers['last-event-id'], undefined);
  const resumedAt = opens.slice(1).map((r) => Number(r.headers['last-event-id']));
  const reconnects = items.filter((i) => i.type === 'reconnecting').map((i) => (i as { after: number }).after);
  assert.equal(resumedAt.slice(0, reconnects.length), reconnects, 'each reconnection resumes after the last event delivered');
  assert.ok(resumedAt.every((n) => n > 0));
  const log = await runEvents(e, id);
  assertExactlyTheLog(events, log as never);
  assert.ok(
    events.some((ev) => ev.type === 'node.output.delta' && ev.sequence > resumedAt[1]!),
    'deltas arrived after the second resume',
  );
  const run = await c.getRun(id);
  assert.is(run.status, 'completed');
  assert.is(stream.outputs.get('llm'), CHUNKS.join(''));
  assert.is(stream.outputs.get('llm'), run.outputs[0]!.value, 'the rebuilt node output is the final output');
  assert.is(stream.terminal?.type, 'run.completed');
});

test('streamRun after a drop that outlasts the run: the terminal snapshot, then the missing events from the log, once each', async () => {
  let streams = 0;
  let id = '';
  proxy.plan = async (r) => {
    if (!r.path.includes('/stream')) return { kind: 'forward' };
    streams++;
    if (streams === 1) return { kind: 'cut-stream', afterEvents: 3 };
    // The reconnection reaches the service only once the run has ended.
    await settle(e, id);
    return { kind: 'forward' };
  };
  const c = client();
  id = (await c.startRun(W_STORY)).id;
  const { stream, items, events } = await follow(c, id);
  const snapshots = items.filter((i) => i.type === 'snapshot').map((i) => (i as { run: { status: string } }).run.status);
  assert.is(snapshots.at(-1), 'completed', 'the resumed connection found the run terminal');
  assertExactlyTheLog(events, (await runEvents(e, id)) as never);
  assert.is(stream.outputs.get('llm'), (await c.getRun(id)).outputs[0]!.value);
});

test('cancelRun ends a run in flight (the stream ends with run.cancelled); a second cancel reports the terminal status', async () => {
  const c = client();
  const { id } = await c.startRun(W_LONG_DELAY);
  const stream = c.streamRun(id);
  const seen: string[] = [];
  for await (const item of stream) {
    if (item.type !== 'event') continue;
    seen.push(item.event.type);
    if (item.event.type === 'run.suspended') {
      const r = await c.cancelRun(id);
      assert.equal([r.status, r.cancelRequested], ['cancelled', true]);
    }
  }
  assert.is(seen.at(-1), 'run.cancelled');
  const again = await c.cancelRun(id);
  assert.equal([again.status, again.cancelRequested], ['cancelled', false]);
  const run = await c.waitForRun(id);
  assert.equal([run.status, run.billingStatus, run.displayedChargeUsd], ['cancelled', 'not_charged', null]);
});

test('errors are ApiErrors with the envelope: a refused key, an unknown workflow, invalid inputs with details; an unreachable service is a ConnectionError', async () => {
  const refused = await client(e.t.base, 'wr_nope')
    .listWorkflows()
    .catch((x) => x);
  assert.instance(refused, ApiError);
  assert.equal([refused.status, refused.code], [401, 'unauthorized']);
  assert.ok(refused.requestId, 'carries X-Request-Id');

  const unknown = await client(e.t.base)
    .startRun('00000000-0000-4000-8000-0000000000ff')
    .catch((x) => x);
  assert.equal([unknown.status, unknown.code], [404, 'not_found']);

  const invalid = await client(e.t.base)
    .startRun(W_SUMMARY, { inputs: { nope: 1 } })
    .catch((x) => x);
  assert.instance(invalid, ApiError);
  assert.equal([invalid.status, invalid.code], [400, 'invalid_inputs']);
  assert.ok(
    invalid.details.some((d: { input: string }) => d.input === 'nope'),
    JSON.stringify(invalid.details),
  );

  const down = new WorkflowRunClient({ apiKey: 'k', baseUrl: 'http://127.0.0.1:9/v1', maxAttempts: 2, retryBaseMs: 10 });
  const gone = await down.getRun('00000000-0000-4000-8000-000000000000').catch((x) => x);
  assert.instance(gone, ConnectionError);
});

test('on a server that does not honour Prefer: wait, startRun({ wait }) returns no run and runAndWait polls to the end', async () => {
  // The proxy strips Prefer, as a server without the preference would ignore it.
  proxy.plan = (r) => ({ kind: 'forward', dropHeaders: r.method === 'POST' ? ['prefer'] : [] });
  const c = client();
  const started = await c.startRun(W_SUMMARY, { inputs: { topic: 'moths' }, wait: 5 });
  assert.is(started.run, null);
  assert.is(posts()[0]!.headers.prefer, 'wait=5');
  const run = await c.runAndWait(W_LIMIT, { timeoutMs: 20_000 });
  assert.is(run.status, 'failed', 'the compute limit fails it');
  assert.ok(proxy.requests.filter((r) => r.method === 'GET' && r.path.startsWith('/v1/runs/')).length >= 2, 'it polled');
});

test('an inline 200 answer is taken as the finished run only with Preference-Applied', async () => {
  // What a server honouring the preference sends: the terminal Run itself, with Preference-Applied.
  const inline =
    (applied: boolean) =>
    async (r: SeenRequest): Promise<Fault> => {
      if (r.method !== 'POST' || r.path !== '/v1/runs') return { kind: 'forward' };
      const res = await fetch(`${e.t.base}/runs`, {
        method: 'POST',
        headers: {
          authorization: String(r.headers.authorization),
          'content-type': 'application/json',
          'idempotency-key': String(r.headers['idempotency-key']),
        },
        body: r.body,
      });
      const id = ((await res.json()) as { run: { id: string } }).run.id;
      const run = await settle(e, id);
      const headers: Record<string, string> = applied ? { 'preference-applied': 'wait=30' } : {};
      return { kind: 'respond', status: 200, headers, body: run };
    };
  const c = client();
  proxy.plan = inline(true);
  const started = await c.startRun(W_SUMMARY, { inputs: { topic: 'newts' }, wait: 30 });
  assert.ok(started.run, 'the inline run');
  assert.equal([started.run!.status, started.run!.outputs[0]!.value], ['completed', 'About newts']);
  assert.equal(started.run, await c.getRun(started.id));
  assert.is(started.statusUrl, `${proxy.base}/runs/${started.id}`);

  proxy.plan = inline(false);
  const unsure = await c.startRun(W_SUMMARY, { inputs: { topic: 'voles' }, wait: 30 });
  assert.is(unsure.run, null, 'no Preference-Applied: not trusted as the final answer');
  assert.is((await c.waitForRun(unsure.id)).status, 'completed');
});

test('startAfter, rescheduleRun and debounce: the run waits with scheduledFor, moves, and a burst of calls is one run', async () => {
  const c = client();
  const later = await c.startRun(W_SUMMARY, { inputs: { topic: 'later' }, startAfter: '1h' });
  assert.is(posts()[0]!.headers['start-after'], '1h');
  const waiting = await c.getRun(later.id);
  assert.is(waiting.status, 'pending');
  assert.is(waiting.queue, null);
  const at = new Date(Date.now() + 2 * 3_600_000).toISOString();
  assert.is((await c.rescheduleRun(later.id, at)).scheduledFor, at);
  await c.cancelRun(later.id);
  const refused = await c.rescheduleRun(later.id, at).catch((err: unknown) => err);
  assert.ok(refused instanceof ApiError && refused.code === 'not_scheduled');

  const debounce = { key: `doc-${Date.now()}`, delay: '1h', maxDelay: '2h' };
  const first = await c.startRun(W_SUMMARY, { inputs: { topic: 'v1' }, debounce });
  const second = await c.startRun(W_SUMMARY, { inputs: { topic: 'v2' }, debounce });
  assert.equal([first.debounced, second.debounced], [false, true]);
  assert.is(second.id, first.id);
  await c.cancelRun(first.id);
});

test('verifyWebhook accepts the real signed delivery of a run and rejects a tampered one', async () => {
  const c = client();
  const { id } = await c.startRun(W_SUMMARY, { inputs: { topic: 'bees' } });
  const run = await c.waitForRun(id);
  let hook;
  for (let i = 0; i < 200 && !hook; i++) {
    hook = e.hooks.find((h) => JSON.parse(h.body).data?.id === id);
    if (!hook) await new Promise((r) => setTimeout(r, 50));
  }
  assert.ok(hook, 'a delivery arrived');
  const payload = verifyWebhook(WEBHOOK_SECRET, hook.body, hook.headers);
  assert.is(payload.type, 'run.completed');
  assert.equal(payload.data, run);
  assert.throws(
    () => verifyWebhook(WEBHOOK_SECRET, hook.body.replace('bees', 'wasps'), hook.headers),
    (err: unknown) => err instanceof WebhookVerificationError,
  );
});

test.run();
