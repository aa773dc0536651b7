import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { EventSource } from 'eventsource';
import { appendRunEvents } from '../../src/runs/fenced-write.ts';
import { interceptStatements } from '../../src/db/statement-connection.ts';
import { finishRun } from '../../src/runs/finish-run.ts';
import { followRunEvents } from '../../src/runs/follow-run-events.ts';
import { readEvents, type PublicRunEvent } from '../../src/runs/run-views.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';

const W_SUMMARY = 'aaaaaaaa-0000-4000-8000-000000000001';
const W_TYPED = 'aaaaaaaa-0000-4000-8000-000000000002';

const t = suite<{ t: TestApp }>('runs: reads, cancel, events, stream');
t.before(async (ctx) => {
  ctx.t = await startTestApp();
});
t.after(async (ctx) => ctx.t.close());

async function start(t: TestApp, key = 'wr_test_bob', inputs: Record<string, unknown> = { topic: 'x' }, workflow = W_SUMMARY): Promise<string> {
  const res = await t.call('POST', '/runs', { key, body: { workflow, inputs } });
  assert.is(res.status, 202, res.text);
  return res.body.run.id;
}

/** Plays the engine's part: appends events and publishes them like a committed step would. */
async function emit(t: TestApp, runId: string, events: { type: string; nodeId?: string; data?: Record<string, string> }[]) {
  const written = await t.deps.orm.em.fork().transactional((tx) => appendRunEvents(tx as never, runId, events));
  t.deps.bus.publish(runId, written.last, written.events);
}

async function finish(t: TestApp, runId: string) {
  const last = await t.deps.orm.em.fork().transactional((tx) =>
    finishRun(tx as never, runId, {
      status: 'completed',
      outcome: 'completed',
      outputs: [{ nodeId: 'out', name: 'Summary', type: 'text', value: 'done' }],
      charge: 'full',
    }),
  );
  t.deps.bus.publish(runId, last!.last);
}

/** Removes the interceptor of logReadsThrough after each test. */
let stopReadingThrough: (() => void) | undefined;
t.after.each(() => {
  stopReadingThrough?.();
  stopReadingThrough = undefined;
});

/** Every read of a run's log on the test app's real database passes through `wrap` until the test ends (src/db/statement-connection.ts). */
function logReadsThrough(t: TestApp, wrap: (read: () => Promise<unknown>) => Promise<unknown>): void {
  stopReadingThrough = interceptStatements(t.deps.orm, (sql, send) => (/from run_event_batches/.test(sql) ? wrap(send) : send()));
}

t('a pending run reports every Run field, queue position in FIFO order and empty outputs', async ({ t }) => {
  const a = await start(t);
  const b = await start(t);
  const ra = await t.call('GET', `/runs/${a}`);
  assert.is(ra.status, 200);
  const run = ra.body;
  assert.equal(
    Object.keys(run).sort(),
    [
      'billingStatus',
      'completedAt',
      'deadline',
      'displayedChargeUsd',
      'id',
      'metadata',
      'outcome',
      'outputs',
      'queue',
      'reason',
      'startedAt',
      'status',
      'suspended',
      'workflowId',
      'workflowVersionId',
    ].sort(),
  );
  assert.equal(run.metadata, {});
  assert.is(run.deadline, null);
  assert.is(run.status, 'pending');
  assert.is(run.suspended, false);
  assert.is(run.startedAt, null);
  assert.is(run.billingStatus, 'pending');
  assert.is(run.displayedChargeUsd, null);
  assert.equal(run.outputs, []);
  const qa = run.queue;
  const qb = (await t.call('GET', `/runs/${b}`)).body.queue;
  assert.is(qa.state, 'waiting');
  assert.is(qb.position, qa.position + 1);
  assert.is(qa.etaSeconds, null);
});

t('queue places are exact at every read: a run queued later is behind, and one ahead leaving moves everyone up at once', async ({ t }) => {
  const a = await start(t);
  const b = await start(t);
  const pa = (await t.call('GET', `/runs/${a}`)).body.queue.position as number;
  const c = await start(t);
  const d = await start(t);
  assert.is((await t.call('GET', `/runs/${c}`)).body.queue.position, pa + 2);
  assert.is((await t.call('GET', `/runs/${d}`)).body.queue.position, pa + 3);
  assert.is((await t.call('GET', `/runs/${b}`)).body.queue.position, pa + 1);
  assert.is((await t.call('POST', `/runs/${a}/cancel`)).status, 200);
  assert.is((await t.call('GET', `/runs/${b}`)).body.queue.position, pa);
  assert.is((await t.call('GET', `/runs/${d}`)).body.queue.position, pa + 2);
});

t('runs of another account and malformed ids answer 404', async ({ t }) => {
  const id = await start(t);
  for (const [path, key] of [
    [`/runs/${id}`, 'wr_test_carol'],
    [`/runs/${id}/events`, 'wr_test_carol'],
    ['/runs/nope', 'wr_test_bob'],
  ] as const) {
    const res = await t.call('GET', path, { key });
    assert.is(res.status, 404, path);
    assert.is(res.body.error.code, 'not_found');
  }
  const cancel = await t.call('POST', `/runs/${id}/cancel`, { key: 'wr_test_carol' });
  assert.is(cancel.status, 404);
});

t('the run list is newest first, filterable, paginated and shows suspended runs as running', async ({ t }) => {
  const ids = [await start(t, 'wr_test_carol'), await start(t, 'wr_test_carol'), await start(t, 'wr_test_carol')];
  await t.deps.orm.em.fork().execute(`update runs set status = 'suspended', suspend_reason = 'wait_timer' where id = ?`, [ids[0]]);
  const all = await t.call('GET', '/runs', { key: 'wr_test_carol' });
  assert.equal(
    all.body.runs.map((r: any) => r.id),
    [...ids].reverse(),
  );
  assert.is(all.body.runs[2].status, 'running');
  assert.is(all.body.runs[0].outputs, undefined);
  assert.is(all.body.runs[0].reason, undefined);
  const running = await t.call('GET', '/runs?status=running', { key: 'wr_test_carol' });
  assert.equal(
    running.body.runs.map((r: any) => r.id),
    [ids[0]],
  );
  const page = await t.call('GET', '/runs?limit=2&offset=1', { key: 'wr_test_carol' });
  assert.equal(
    page.body.runs.map((r: any) => r.id),
    [ids[1], ids[0]],
  );
  assert.equal(page.body.pagination, { offset: 1, limit: 2, hasMore: false });
  const byWorkflow = await t.call('GET', `/runs?workflow=${W_TYPED}`, { key: 'wr_test_carol' });
  assert.is(byWorkflow.body.runs.length, 0);
  for (const q of ['status=suspended', 'status=accepted', 'workflow=abc', 'limit=51', 'offset=x']) {
    const bad = await t.call('GET', `/runs?${q}`, { key: 'wr_test_carol' });
    assert.is(bad.status, 400, q);
    assert.is(bad.body.error.code, 'invalid_request', q);
  }
});

t('cancelling a run in flight ends it cancelled, not charged, with a run.cancelled event; a second cancel is a no-op', async ({ t }) => {
  const id = await start(t);
  const res = await t.call('POST', `/runs/${id}/cancel`);
  assert.is(res.status, 200);
  assert.equal(res.body, { id, status: 'cancelled', cancelRequested: true });
  const run = (await t.call('GET', `/runs/${id}`)).body;
  assert.is(run.status, 'cancelled');
  assert.is(run.billingStatus, 'not_charged');
  assert.is(run.displayedChargeUsd, null);
  assert.is(run.queue, null);
  assert.ok(run.completedAt);
  const again = await t.call('POST', `/runs/${id}/cancel`);
  assert.equal(again.body, { id, status: 'cancelled', cancelRequested: false });
  const events = (await t.call('GET', `/runs/${id}/events`)).body.events;
  assert.equal(
    events.map((e: any) => e.type),
    ['run.queued', 'run.cancelled'],
  );
  assert.equal(events[1].data, { status: 'cancelled' });
  const readOnly = await t.call('POST', `/runs/${id}/cancel`, { key: 'wr_test_bob_read' });
  assert.is(readOnly.body.error.code, 'insufficient_scope');
});

t('a completed run is unchanged by a cancel and reports outcome, outputs and a settled charge', async ({ t }) => {
  const id = await start(t, 'wr_test_carol');
  await t.deps.orm.em.fork().execute(`update runs set status = 'running', phase = null, started_at = now(), funding = 'wallet' where id = ?`, [id]);
  await finish(t, id);
  const cancel = await t.call('POST', `/runs/${id}/cancel`, { key: 'wr_test_carol' });
  assert.equal(cancel.body, { id, status: 'completed', cancelRequested: false });
  const run = (await t.call('GET', `/runs/${id}`, { key: 'wr_test_carol' })).body;
  assert.is(run.outcome, 'completed');
  assert.is(run.billingStatus, 'settled');
  // carol's wallet price of v2: 0.25 creator + 2 steps recorded as compute 0 here → 0.25.
  assert.is(run.displayedChargeUsd, 0.25);
  assert.equal(run.outputs, [{ nodeId: 'out', name: 'Summary', type: 'text', value: 'done' }]);
});

t('the event log pages by afterSequence with hasMore and rejects bad cursors', async ({ t }) => {
  const id = await start(t);
  await emit(
    t,
    id,
    Array.from({ length: 1005 }, (_, i) => ({ type: 'node.output.delta', nodeId: 'say', data: { text: `${i},` } })),
  );
  const first = await t.call('GET', `/runs/${id}/events`);
  assert.is(first.body.id, id);
  assert.is(first.body.events.length, 1000);
  assert.is(first.body.hasMore, true);
  assert.equal(
    first.body.events.slice(0, 2).map((e: any) => e.sequence),
    [1, 2],
  );
  const next = await t.call('GET', `/runs/${id}/events?afterSequence=1000`);
  assert.is(next.body.events.length, 6);
  assert.is(next.body.hasMore, false);
  assert.is(next.body.events[0].sequence, 1001);
  const text = [...first.body.events, ...next.body.events]
    .filter((e: any) => e.type === 'node.output.delta')
    .map((e: any) => e.data.text)
    .join('');
  assert.is(text, Array.from({ length: 1005 }, (_, i) => `${i},`).join(''));
  for (const c of ['-1', 'abc', '1.5', '']) {
    const bad = await t.call('GET', `/runs/${id}/events?afterSequence=${c}`);
    assert.is(bad.status, 400, c);
    assert.is(bad.body.error.code, 'invalid_cursor');
  }
  const exec = await t.call('GET', `/runs/${id}/events`, { key: 'wr_test_bob_exec' });
  assert.is(exec.body.error.code, 'insufficient_scope');
});

t('a cursor past the log, up to 2^53 - 1, is an empty page and a stream that waits for later events, never a 500', async ({ t }) => {
  const id = await start(t);
  for (const cursor of [2 ** 31 - 1, 2 ** 31, Number.MAX_SAFE_INTEGER]) {
    const page = await t.call('GET', `/runs/${id}/events?afterSequence=${cursor}`);
    assert.is(page.status, 200, `${cursor}: ${page.text}`);
    assert.equal(page.body, { id, events: [], hasMore: false });
  }
  const s = collect(t, id, { lastEventId: String(2 ** 31) });
  await s.opened;
  await emit(t, id, [{ type: 'run.started', data: { status: 'running' } }]);
  await new Promise((r) => setTimeout(r, 200));
  s.close();
  assert.equal(
    s.frames.map((f) => f.type),
    ['snapshot'],
  );
});

/** Collects SSE frames with the `eventsource` client until the stream's terminal event. */
function collect(t: TestApp, id: string, opts: { key?: string; lastEventId?: string; query?: string } = {}) {
  const frames: { type: string; id: string; data: any }[] = [];
  let resolveDone!: () => void;
  const done = new Promise<void>((r) => (resolveDone = r));
  const es = new EventSource(`${t.base}/runs/${id}/stream${opts.query ?? ''}`, {
    fetch: (input, init) =>
      fetch(input, {
        ...init,
        headers: { ...init?.headers, authorization: `Bearer ${opts.key ?? 'wr_test_bob'}`, ...(opts.lastEventId ? { 'last-event-id': opts.lastEventId } : {}) },
      }),
  });
  const on = (type: string) =>
    es.addEventListener(type, (ev: MessageEvent) => {
      frames.push({ type, id: ev.lastEventId, data: JSON.parse(ev.data) });
      if (type === 'snapshot' && ['completed', 'failed', 'cancelled'].includes(JSON.parse(ev.data).status)) {
        es.close();
        resolveDone();
      }
      if (['run.completed', 'run.failed', 'run.cancelled'].includes(type)) {
        es.close();
        resolveDone();
      }
    });
  for (const type of ['snapshot', 'run.queued', 'run.started', 'node.output.delta', 'node.completed', 'run.completed', 'run.cancelled']) on(type);
  const opened = new Promise<void>((r) => es.addEventListener('open', () => r(), { once: true }));
  return { frames, done, opened, close: () => es.close() };
}

t('the stream sends a snapshot, replays the log, tails live events without gaps or duplicates, then closes', async ({ t }) => {
  const id = await start(t);
  await emit(t, id, [{ type: 'run.started', data: { status: 'running' } }]);
  const s = collect(t, id);
  await s.opened;
  for (let i = 0; i < 20; i++) await emit(t, id, [{ type: 'node.output.delta', nodeId: 'say', data: { text: `${i} ` } }]);
  await emit(t, id, [{ type: 'node.completed', nodeId: 'say' }]);
  await t.deps.orm.em.fork().execute(`update runs set status = 'running', phase = null where id = ?`, [id]);
  await finish(t, id);
  await s.done;
  assert.is(s.frames[0].type, 'snapshot');
  assert.is(s.frames[0].id, '');
  assert.is(s.frames[0].data.id, id);
  const seqs = s.frames.slice(1).map((f) => Number(f.id));
  assert.equal(
    seqs,
    Array.from({ length: seqs.length }, (_, i) => i + 1),
  );
  assert.equal(
    s.frames.slice(1).map((f) => f.data.sequence),
    seqs,
  );
  assert.is(s.frames.at(-1)!.type, 'run.completed');
  assert.is(
    s.frames
      .filter((f) => f.type === 'node.output.delta')
      .map((f) => f.data.data.text)
      .join(''),
    Array.from({ length: 20 }, (_, i) => `${i} `).join(''),
  );
});

t('resuming with Last-Event-ID or afterSequence replays only later events; Last-Event-ID wins', async ({ t }) => {
  const id = await start(t);
  await emit(t, id, [
    { type: 'run.started', data: { status: 'running' } },
    { type: 'node.completed', nodeId: 'a' },
  ]);
  // The log holds run.queued (1), run.started (2), node.completed (3).
  const byHeader = collect(t, id, { lastEventId: '3', query: '?afterSequence=0' });
  const byQuery = collect(t, id, { query: '?afterSequence=3' });
  await Promise.all([byHeader.opened, byQuery.opened]);
  await t.deps.orm.em.fork().execute(`update runs set status = 'running', phase = null where id = ?`, [id]);
  await finish(t, id);
  await Promise.all([byHeader.done, byQuery.done]);
  assert.equal(
    byHeader.frames.map((f) => f.type),
    ['snapshot', 'run.completed'],
  );
  assert.equal(
    byQuery.frames.map((f) => f.type),
    ['snapshot', 'run.completed'],
  );
  assert.is(byQuery.frames[1].id, '4');
});

/** `count` followers of a run from its start, over the test app's database with its log reads counted. */
function countedFollowers(t: TestApp, id: string, count: number) {
  const reads = { count: 0 };
  logReadsThrough(t, (read) => {
    reads.count++;
    return read();
  });
  const got: PublicRunEvent[][] = Array.from({ length: count }, () => []);
  const ended = got.map(
    (events) =>
      new Promise<void>((resolve, reject) =>
        followRunEvents(t.deps, id, 0, { deliver: (ev) => void events.push(ev), end: (err) => (err ? reject(err) : resolve()) }),
      ),
  );
  const caughtUp = async (n: number) => {
    for (let i = 0; i < 500 && !got.every((g) => g.length >= n); i++) await new Promise((r) => setTimeout(r, 10));
  };
  return { reads, got, ended: Promise.all(ended), caughtUp };
}

t('followers of one run at the same cursor share one log read per event, and each gets every event once in order', async ({ t }) => {
  const id = await start(t);
  const FOLLOWERS = 200;
  const { reads, got, ended, caughtUp } = countedFollowers(t, id, FOLLOWERS);
  await caughtUp(1); // run.queued replayed
  assert.ok(reads.count <= 2, `the replay took ${reads.count} reads`);
  reads.count = 0;
  for (let i = 0; i < 5; i++) {
    // Told of the sequence only, as another process's bus tells it: each notification is a read.
    const { last } = await t.deps.orm.em
      .fork()
      .transactional((tx) => appendRunEvents(tx as never, id, [{ type: 'node.output.delta', nodeId: 'say', data: { text: `${i}` } }]));
    t.deps.bus.publish(id, last);
    await caughtUp(2 + i);
  }
  await t.deps.orm.em.fork().execute(`update runs set status = 'running', phase = null where id = ?`, [id]);
  await finish(t, id);
  await ended;
  for (const g of got)
    assert.equal(
      g.map((ev) => ev.sequence),
      [1, 2, 3, 4, 5, 6, 7],
    );
  // 6 notifications; one follower reading alone would make one read each, 200 would make 1200.
  assert.ok(reads.count <= 12, `${reads.count} log reads for 6 events to ${FOLLOWERS} followers`);
});

t('a follower delivers the events a publish of this process carries without reading the log, as the log holds them, and reads across a gap', async ({ t }) => {
  const id = await start(t);
  const { reads, got, ended, caughtUp } = countedFollowers(t, id, 2);
  await caughtUp(1); // run.queued, read from the log
  reads.count = 0;
  await emit(t, id, [
    { type: 'node.started', nodeId: 'say' },
    { type: 'node.output.delta', nodeId: 'say', data: { text: 'a' } },
  ]);
  await emit(t, id, [{ type: 'node.output.delta', nodeId: 'say', data: { text: 'b' } }]);
  await caughtUp(4);
  assert.is(reads.count, 0, 'carried events were delivered without a read');
  // Written but never published (as if its notification were lost): the next carried event does not continue it.
  await t.deps.orm.em.fork().transactional((tx) => appendRunEvents(tx as never, id, [{ type: 'node.output.delta', nodeId: 'say', data: { text: 'c' } }]));
  await emit(t, id, [{ type: 'node.completed', nodeId: 'say' }]);
  await caughtUp(6);
  assert.ok(reads.count >= 1, 'the gap was read from the log');
  await t.deps.orm.em.fork().execute(`update runs set status = 'running', phase = null where id = ?`, [id]);
  await finish(t, id);
  await ended;
  const log = await readEvents(t.deps.orm.em.fork() as never, id, 0, 100);
  for (const events of got) assert.equal(events, log);
});

t('a follower that joins while an older read of the log is running still gets an event committed between that read and its subscription', async ({ t }) => {
  const id = await start(t);
  await t.deps.orm.em.fork().execute(`update runs set status = 'running', phase = null where id = ?`, [id]);
  // The first log read runs (its snapshot taken before the run finishes), then its rows are held back.
  let first = true;
  let ran!: () => void;
  const readRan = new Promise<void>((r) => (ran = r));
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  logReadsThrough(t, async (read) => {
    const hold = first;
    first = false;
    const rows = await read();
    if (hold) {
      ran();
      await released;
    }
    return rows;
  });
  const follow = () => {
    const got: string[] = [];
    const ended = new Promise<void>((resolve, reject) =>
      followRunEvents(t.deps, id, 0, { deliver: (ev) => void got.push(ev.type), end: (err) => (err ? reject(err) : resolve()) }),
    );
    return { got, ended };
  };
  const early = follow();
  await readRan;
  await finish(t, id); // committed and published after the held read's snapshot
  const late = follow(); // subscribes now: it was never told of run.completed
  release();
  const within = (p: Promise<void>) => Promise.race([p.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 3000))]);
  assert.ok(await within(early.ended), 'the first follower ended');
  assert.ok(await within(late.ended), 'the follower that joined later ended');
  assert.equal(early.got, ['run.queued', 'run.completed']);
  assert.equal(late.got, ['run.queued', 'run.completed']);
});

t('a run already terminal gets its snapshot and the close', async ({ t }) => {
  const id = await start(t);
  await t.call('POST', `/runs/${id}/cancel`);
  const res = await fetch(`${t.base}/runs/${id}/stream`, { headers: { authorization: 'Bearer wr_test_bob' } });
  assert.is(res.status, 200);
  assert.match(res.headers.get('content-type')!, 'text/event-stream');
  const body = await res.text();
  assert.match(body, /^event: snapshot\ndata: \{.*"status":"cancelled".*\}\n\n$/s);
});

t('stream cursors are validated before the stream starts', async ({ t }) => {
  const id = await start(t);
  for (const [headers, q] of [
    [{ 'last-event-id': 'x' }, ''],
    [{}, '?afterSequence=-3'],
  ] as const) {
    const res = await t.call('GET', `/runs/${id}/stream${q}`, { headers: { ...headers } });
    assert.is(res.status, 400);
    assert.is(res.body.error.code, 'invalid_cursor');
  }
  const other = await t.call('GET', `/runs/${id}/stream`, { key: 'wr_test_carol' });
  assert.is(other.status, 404);
});

t('outputs larger than MAX_OUTPUT_BYTES answer 413 output_too_large instead of the run', async ({ t }) => {
  const id = await start(t);
  const big = [{ nodeId: 'out', name: 'Summary', type: 'text', value: 'x'.repeat(t.deps.config.maxOutputBytes) }];
  await t.deps.orm.em.fork().execute(`update runs set outputs = ?::jsonb where id = ?`, [JSON.stringify(big), id]);
  const res = await t.call('GET', `/runs/${id}`);
  assert.is(res.status, 413);
  assert.is(res.body.error.code, 'output_too_large');
  const list = await t.call('GET', '/runs?limit=1');
  assert.is(list.status, 200);
});

t.run();
