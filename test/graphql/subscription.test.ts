import { createClient, type Client } from 'graphql-sse';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { cancelRun } from '../../src/runs/cancel-run.ts';
import { ALICE_SECRET, GREETER, TOKEN, startHarness, type Harness } from './helpers/harness.ts';

let h: Harness;
let client: Client;

test.before(async () => {
  h = await startHarness();
  client = createClient({
    url: `${h.url}/graphql/stream`,
    headers: { Authorization: `Bearer ${TOKEN}` },
    fetchFn: fetch,
    retryAttempts: 0,
  });
});

test.after(async () => {
  client?.dispose();
  await h?.close();
});

const SUB = `subscription($id: ID!, $after: Int) { runEvents(runId: $id, afterSequence: $after) { runId type sequence nodeId data } }`;
type Ev = { runId: string; type: string; sequence: number; nodeId: string | null; data: Record<string, string> };

/** Collects events until the subscription completes (or times out). */
async function collect(iterator: AsyncIterableIterator<{ data?: unknown; errors?: unknown }>, onEvent?: (e: Ev) => Promise<void> | void, ms = 10_000) {
  const events: Ev[] = [];
  const errors: unknown[] = [];
  const timer = setTimeout(() => void iterator.return?.(), ms);
  try {
    for await (const result of iterator) {
      if (result.errors) errors.push(...(result.errors as unknown[]));
      const ev = (result.data as { runEvents?: Ev } | undefined)?.runEvents;
      if (ev) {
        events.push(ev);
        await onEvent?.(ev);
      }
    }
  } finally {
    clearTimeout(timer);
  }
  return { events, errors };
}

test('runEvents replays after the cursor, then delivers live events in order until the terminal event', async () => {
  const id = await h.startRun(ALICE_SECRET, GREETER, { name: 'x', place: 'y' });
  await h.appendEvents(id, [
    { type: 'run.preparing', data: { status: 'pending' } },
    { type: 'run.started', data: { status: 'running' } },
  ]);
  const iterator = client.iterate({ query: SUB, variables: { id, after: 1 } });
  const { events, errors } = await collect(iterator, async (ev) => {
    // Live part: once the replay has reached the present, the run moves on and then ends.
    if (ev.sequence === 3) {
      await h.appendEvents(id, [{ type: 'node.started', nodeId: 'greet', data: {} }]);
      await h.appendEvents(id, [{ type: 'node.output.delta', nodeId: 'greet', data: { text: 'Hel' } }]);
      await cancelRun(h.app.deps, null, id);
    }
  });
  assert.equal(errors, []);
  assert.equal(
    events.map((e) => `${e.sequence}:${e.type}`),
    ['2:run.preparing', '3:run.started', '4:node.started', '5:node.output.delta', '6:run.cancelled'],
  );
  assert.ok(events.every((e) => e.runId === id));
  assert.equal(events[3]!.data, { text: 'Hel' });
  assert.is(events[2]!.nodeId, 'greet');
});

test('runEvents delivers every event exactly once while events are appended during the replay', async () => {
  const id = await h.startRun(ALICE_SECRET, GREETER, { name: 'x', place: 'y' });
  for (let i = 0; i < 20; i++) await h.appendEvents(id, [{ type: 'node.output.delta', nodeId: 'greet', data: { text: String(i) } }]);
  const writer = (async () => {
    for (let i = 20; i < 60; i++) {
      await h.appendEvents(id, [{ type: 'node.output.delta', nodeId: 'greet', data: { text: String(i) } }]);
      if (i % 7 === 0) await new Promise((r) => setTimeout(r, 1));
    }
    await cancelRun(h.app.deps, null, id);
  })();
  const { events, errors } = await collect(client.iterate({ query: SUB, variables: { id } }));
  await writer;
  assert.equal(errors, []);
  assert.equal(
    events.map((e) => e.sequence),
    Array.from({ length: 62 }, (_, i) => i + 1),
  );
  assert.is(events.at(-1)!.type, 'run.cancelled');
});

test('runEvents of a finished run replays up to its terminal event and completes; past it, completes at once', async () => {
  const id = await h.startRun(ALICE_SECRET, GREETER, { name: 'x', place: 'y' });
  await cancelRun(h.app.deps, null, id);
  const replay = await collect(client.iterate({ query: SUB, variables: { id } }));
  assert.equal(
    replay.events.map((e) => e.type),
    ['run.queued', 'run.cancelled'],
  );
  const started = Date.now();
  const past = await collect(client.iterate({ query: SUB, variables: { id, after: 2 } }));
  assert.equal(past.events, []);
  assert.equal(past.errors, []);
  assert.ok(Date.now() - started < 5_000);
});

test('runEvents resumed at or past the end of a live run completes when the run ends, whatever the cursor', async () => {
  const id = await h.startRun(ALICE_SECRET, GREETER, { name: 'x', place: 'y' });
  // The log holds run.queued (1); the cancel will write run.cancelled (2).
  const cursors = [1, 2, 3, 100, 2 ** 31 - 1];
  const started = Date.now();
  const subs = cursors.map((after) => collect(client.iterate({ query: SUB, variables: { id, after } })));
  await new Promise((r) => setTimeout(r, 300));
  await cancelRun(h.app.deps, null, id);
  const results = await Promise.all(subs);
  assert.ok(Date.now() - started < 5_000, `a subscription was still open ${Date.now() - started} ms after it began`);
  assert.equal(
    results.map((r) => r.events.map((e) => `${e.sequence}:${e.type}`)),
    [['2:run.cancelled'], [], [], [], []],
  );
  assert.equal(
    results.flatMap((r) => r.errors),
    [],
  );
});

test('runEvents of an unknown run answers NOT_FOUND', async () => {
  const iterator = client.iterate({ query: SUB, variables: { id: '00000000-0000-4000-8000-000000000000' } });
  const { events, errors } = await collect(iterator);
  assert.equal(events, []);
  assert.is((errors[0] as { extensions?: { code?: string } }).extensions?.code, 'NOT_FOUND');
});

test('a client that goes away stops its subscription and releases the bus listener', async () => {
  const id = await h.startRun(ALICE_SECRET, GREETER, { name: 'x', place: 'y' });
  const bus = h.app.deps.bus as unknown as { subscribe: (...a: unknown[]) => () => void };
  let live = 0;
  const original = bus.subscribe.bind(bus);
  bus.subscribe = (...args: unknown[]) => {
    live++;
    const off = original(...args);
    return () => {
      live--;
      off();
    };
  };
  try {
    const iterator = client.iterate({ query: SUB, variables: { id } });
    const first = await iterator.next();
    assert.is((first.value as { data: { runEvents: Ev } }).data.runEvents.sequence, 1);
    assert.is(live, 1);
    await iterator.return?.();
    for (let i = 0; i < 100 && live > 0; i++) await new Promise((r) => setTimeout(r, 20));
    assert.is(live, 0);
  } finally {
    bus.subscribe = original;
  }
});

test('queries also run over the stream endpoint with the same limits', async () => {
  const ok = await collect(client.iterate({ query: `{ account(handle: "alice") { handle } }` }) as never);
  assert.equal(ok.errors, []);
  const tooBig = client.iterate({ query: `{ runs(limit: 100) { runs { events(limit: 100) { sequence type ts data } } } }` });
  const res = await collect(tooBig);
  assert.is((res.errors[0] as { extensions?: { code?: string } }).extensions?.code, 'QUERY_TOO_COMPLEX');
  const deep = await collect(
    client.iterate({ query: `{ runs { runs { workflow { owner { purchases { workflow { owner { purchases { workflow { id } } } } } } } } } }` }),
  );
  assert.equal(deep.events, []);
  assert.is((deep.errors[0] as { extensions?: { code?: string } }).extensions?.code, 'QUERY_TOO_DEEP');
});

test.run();
