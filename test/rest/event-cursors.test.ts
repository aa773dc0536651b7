import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { appendRunEvents } from '../../src/runs/fenced-write.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';

/**
 * Event cursors and offsets across their whole documented range (0..2^53−1): a cursor beyond the log
 * is an empty page, or a stream that waits for later events; one above the range is the spec's 400.
 */

const W_SUMMARY = 'aaaaaaaa-0000-4000-8000-000000000001';
const BEYOND_INT4 = '2147483648';
const MAX_SAFE = '9007199254740991';
const ABOVE_MAX = ['9007199254740992', '99999999999999999999'];

const t = suite<{ t: TestApp }>('event cursors and offsets up to 2^53−1');
t.before(async (ctx) => {
  ctx.t = await startTestApp({ env: { SSE_HEARTBEAT_MS: '50' } });
});
t.after(async (ctx) => ctx.t.close());

async function start(t: TestApp): Promise<string> {
  const res = await t.call('POST', '/runs', { body: { workflow: W_SUMMARY, inputs: { topic: 'cursor' } } });
  assert.is(res.status, 202, res.text);
  return res.body.run.id;
}

async function emit(t: TestApp, runId: string, events: { type: string; nodeId?: string; data?: Record<string, string> }[]) {
  // Told of the sequence only, as another process's bus tells it: the stream reads the log.
  const { last } = await t.deps.orm.em.fork().transactional((tx) => appendRunEvents(tx as never, runId, events));
  t.deps.bus.publish(runId, last);
}

/** Reads a stream until it ends or carries two heartbeats after its snapshot (it is open and following). */
async function readStream(t: TestApp, runId: string, query: string, headers: Record<string, string> = {}, whileOpen?: () => Promise<void>) {
  const ac = new AbortController();
  const res = await fetch(`${t.base}/runs/${runId}/stream${query}`, { headers: { authorization: 'Bearer wr_test_bob', ...headers }, signal: ac.signal });
  if (res.status !== 200) return { status: res.status, body: await res.json(), text: '', ended: true };
  const reader = res.body!.getReader();
  let text = '';
  let ended = false;
  let acted = false;
  const deadline = Date.now() + 5000;
  while ((text.match(/: heartbeat\n\n/g) ?? []).length < 2 && Date.now() < deadline) {
    const { value, done } = await reader.read();
    if (done) {
      ended = true;
      break;
    }
    text += new TextDecoder().decode(value);
    // Once the snapshot is out, the engine appends an event the cursor is past.
    if (!acted && text.includes('event: snapshot') && whileOpen) {
      acted = true;
      await whileOpen();
    }
  }
  ac.abort();
  return { status: res.status, body: undefined, text, ended };
}

t('the event log answers an empty page for cursors beyond the log up to 2^53−1, and 400 invalid_cursor above it', async ({ t }) => {
  const id = await start(t);
  for (const cursor of [BEYOND_INT4, '4294967296', MAX_SAFE]) {
    const page = await t.call('GET', `/runs/${id}/events?afterSequence=${cursor}`);
    assert.is(page.status, 200, `${cursor}: ${page.text}`);
    assert.equal(page.body, { id, events: [], hasMore: false });
  }
  for (const cursor of ABOVE_MAX) {
    const bad = await t.call('GET', `/runs/${id}/events?afterSequence=${cursor}`);
    assert.is(bad.status, 400, cursor);
    assert.is(bad.body.error.code, 'invalid_cursor', cursor);
  }
});

t('offsets up to 2^53−1 are an empty page of runs or workflows; above it is 400 invalid_request', async ({ t }) => {
  await start(t);
  for (const path of ['/runs', '/workflows']) {
    const page = await t.call('GET', `${path}?offset=${MAX_SAFE}`);
    assert.is(page.status, 200, `${path}: ${page.text}`);
    assert.equal(page.body.pagination, { offset: Number(MAX_SAFE), limit: 20, hasMore: false });
    for (const offset of ABOVE_MAX) {
      const bad = await t.call('GET', `${path}?offset=${offset}`);
      assert.is(bad.status, 400, `${path} ${offset}`);
      assert.is(bad.body.error.code, 'invalid_request', `${path} ${offset}`);
    }
  }
});

t('a stream resumed beyond the log (query or Last-Event-ID, up to 2^53−1) stays open and sends no earlier event', async ({ t }) => {
  const id = await start(t);
  for (const cursor of [BEYOND_INT4, MAX_SAFE]) {
    for (const [query, headers] of [
      [`?afterSequence=${cursor}`, {}],
      ['', { 'last-event-id': cursor }],
    ] as const) {
      const where = `${cursor} ${query ? 'query' : 'Last-Event-ID'}`;
      const s = await readStream(t, id, query, headers, () => emit(t, id, [{ type: 'node.output.delta', nodeId: 'say', data: { text: 'x' } }]));
      assert.is(s.status, 200, where);
      assert.match(s.text, /^event: snapshot\n/, where);
      assert.not.ok(s.ended, `${where}: the stream ended after its snapshot`);
      assert.not.match(s.text, /\nid: /, `${where}: an event at or before the cursor was sent`);
    }
  }
});

t('stream cursors above 2^53−1 are 400 invalid_cursor, in the query and in Last-Event-ID', async ({ t }) => {
  const id = await start(t);
  for (const cursor of ABOVE_MAX) {
    for (const [query, headers] of [
      [`?afterSequence=${cursor}`, {}],
      ['', { 'last-event-id': cursor }],
    ] as const) {
      const s = await readStream(t, id, query, headers);
      assert.is(s.status, 400, `${cursor} ${query}`);
      assert.is((s.body as { error: { code: string } }).error.code, 'invalid_cursor');
    }
  }
});

t.run();
