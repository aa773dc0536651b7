import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createClient } from 'graphql-sse';
import { startPeerApp, startTestApp, type TestApp } from '../helpers/app.ts';
import { ALICE_SECRET, GREETER, TOKEN, startHarness } from '../graphql/helpers/harness.ts';

/**
 * MAX_STREAMS_PER_KEY (src/runs/stream-slots.ts): open streams per API key, counted over
 * every process on the database (on a Postgres server; PGlite is one process), refused with 429
 * `too_many_streams` (not `rate_limited`); 0 turns the limit off; GraphQL subscriptions have the same
 * limit per token.
 */

const W_SUMMARY = 'aaaaaaaa-0000-4000-8000-000000000001';

interface Open {
  status: number;
  body: any;
  headers: Headers;
  close: () => void;
}

async function openStream(base: string, runId: string, key: string): Promise<Open> {
  const ac = new AbortController();
  const res = await fetch(`${base}/runs/${runId}/stream`, { headers: { authorization: `Bearer ${key}` }, signal: ac.signal });
  const body = (res.headers.get('content-type') ?? '').startsWith('text/event-stream') ? undefined : await res.json();
  if (body === undefined)
    void res.body
      ?.getReader()
      .read()
      .catch(() => undefined);
  return { status: res.status, body, headers: res.headers, close: () => ac.abort() };
}

/** Opens until the server has seen earlier closes (it learns of a disconnect asynchronously). */
async function openEventually(base: string, runId: string, key: string): Promise<Open> {
  let s = await openStream(base, runId, key);
  for (let i = 0; s.status === 429 && i < 100; i++) {
    await new Promise((r) => setTimeout(r, 30));
    s = await openStream(base, runId, key);
  }
  return s;
}

async function startRun(t: TestApp): Promise<string> {
  const res = await t.call('POST', '/runs', { key: 'wr_test_bob', body: { workflow: W_SUMMARY, inputs: { topic: 'x' } } });
  assert.is(res.status, 202, res.text);
  return res.body.run.id;
}

const limited = suite<{ t: TestApp; peer?: Awaited<ReturnType<typeof startPeerApp>> }>('stream limits: MAX_STREAMS_PER_KEY=3');
limited.before(async (ctx) => {
  ctx.t = await startTestApp({ env: { MAX_STREAMS_PER_KEY: '3' } });
  // A second process on the same Postgres server counts against the same limit; PGlite has one process.
  if (process.env.DATABASE_URL) ctx.peer = await startPeerApp(undefined, { MAX_STREAMS_PER_KEY: '3' });
});
limited.after(async (ctx) => {
  await ctx.peer?.app.close();
  await ctx.t.close();
});

limited(
  'the key over its limit gets 429 too_many_streams with Retry-After, wherever the streams are open; a closed stream frees its slot',
  async ({ t, peer }) => {
    const run = await startRun(t);
    const other = peer?.base ?? t.base;
    const open: Open[] = [];
    try {
      open.push(await openStream(t.base, run, 'wr_test_bob'), await openStream(other, run, 'wr_test_bob'), await openStream(t.base, run, 'wr_test_bob'));
      assert.equal(
        open.map((s) => s.status),
        [200, 200, 200],
      );
      for (const base of [t.base, other]) {
        const refused = await openStream(base, run, 'wr_test_bob');
        assert.is(refused.status, 429);
        assert.is(refused.body.error.code, 'too_many_streams');
        assert.match(refused.body.error.message, /3 open streams/);
        assert.ok(Number(refused.headers.get('retry-after')) >= 1);
      }
      // Per key: another key of the same account has its own slots.
      const read = await openStream(other, run, 'wr_test_bob_read');
      open.push(read);
      assert.is(read.status, 200);
      open.shift()!.close(); // one on the first process
      const again = await openEventually(other, run, 'wr_test_bob');
      open.push(again);
      assert.is(again.status, 200, 'the slot freed on one process is usable on the other');
    } finally {
      for (const s of open) s.close();
    }
  },
);

limited('a stream refused its slot leaves no follower of the run behind (its replay had begun), and a closed one neither', async ({ t }) => {
  const run = await startRun(t);
  const bus = t.deps.bus;
  const subscribe = bus.subscribe.bind(bus);
  let following = 0;
  bus.subscribe = (runId, listener) => {
    const off = subscribe(runId, listener);
    following++;
    return () => {
      following--;
      off();
    };
  };
  const open: Open[] = [];
  try {
    for (let i = 0; i < 3; i++) open.push(await openEventually(t.base, run, 'wr_test_bob'));
    assert.equal(
      open.map((s) => s.status),
      [200, 200, 200],
    );
    assert.is(following, 3);
    assert.is((await openStream(t.base, run, 'wr_test_bob')).status, 429);
    assert.is(following, 3, 'the refused stream unsubscribed');
    for (const s of open.splice(0)) s.close();
    for (let i = 0; i < 100 && following > 0; i++) await new Promise((r) => setTimeout(r, 20));
    assert.is(following, 0, 'closed streams unsubscribed');
  } finally {
    bus.subscribe = subscribe;
    for (const s of open) s.close();
  }
});

limited.run();

const unlimited = suite<{ t: TestApp }>('stream limits: MAX_STREAMS_PER_KEY=0');
unlimited.before(async (ctx) => {
  ctx.t = await startTestApp({ env: { MAX_STREAMS_PER_KEY: '0' } });
});
unlimited.after(async (ctx) => ctx.t.close());

unlimited('0 turns the limit off', async ({ t }) => {
  const run = await startRun(t);
  const open = await Promise.all(Array.from({ length: 12 }, () => openStream(t.base, run, 'wr_test_bob')));
  try {
    assert.equal([...new Set(open.map((s) => s.status))], [200]);
  } finally {
    for (const s of open) s.close();
  }
});

unlimited.run();

const graphql = suite('stream limits: GraphQL subscriptions');

graphql('GraphQL subscriptions share the limit per token and are refused with TOO_MANY_STREAMS', async () => {
  const h = await startHarness({ MAX_STREAMS_PER_KEY: '2' });
  const client = createClient({ url: `${h.url}/graphql/stream`, headers: { Authorization: `Bearer ${TOKEN}` }, fetchFn: fetch, retryAttempts: 0 });
  const SUB = `subscription($id: ID!) { runEvents(runId: $id) { type sequence } }`;
  const iterators: AsyncIterableIterator<any>[] = [];
  try {
    const id = await h.startRun(ALICE_SECRET, GREETER, { name: 'x', place: 'y' });
    for (let i = 0; i < 2; i++) {
      const it = client.iterate({ query: SUB, variables: { id } });
      iterators.push(it);
      const first = await it.next();
      assert.is(first.value?.data?.runEvents?.type, 'run.queued', `subscription ${i + 1} is live`);
    }
    const third = client.iterate({ query: SUB, variables: { id } });
    iterators.push(third);
    const refused = await third.next();
    assert.is(refused.value?.errors?.[0]?.extensions?.code, 'TOO_MANY_STREAMS');
    await iterators[0]!.return?.();
    let again: any;
    for (let i = 0; i < 100; i++) {
      const it = client.iterate({ query: SUB, variables: { id } });
      iterators.push(it);
      again = (await it.next()).value;
      if (!again?.errors) break;
      await new Promise((r) => setTimeout(r, 30));
    }
    assert.is(again?.data?.runEvents?.type, 'run.queued', 'a finished subscription frees its slot');
  } finally {
    for (const it of iterators) await it.return?.();
    client.dispose();
    await h.close();
  }
});

graphql.run();
