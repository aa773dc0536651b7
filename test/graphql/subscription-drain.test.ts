import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ALICE_SECRET, GREETER, TOKEN, startHarness } from './helpers/harness.ts';

/**
 * Stop means drain for GraphQL subscriptions too (docs/operations.md#start-and-stop): an open
 * graphql-sse stream ends, at shutdown, with the same `retry:` hint as a REST stream, so its client
 * resubscribes to another process instead of seeing the connection cut.
 */

const SUB = `subscription($id: ID!) { runEvents(runId: $id, afterSequence: 0) { runId type sequence } }`;

test('an open subscription stream ends at shutdown with a retry hint as its last frame', async () => {
  const h = await startHarness();
  let closed = false;
  try {
    const id = await h.startRun(ALICE_SECRET, GREETER, { name: 'x', place: 'y' });
    await h.appendEvents(id, [{ type: 'run.started', data: { status: 'running' } }]);
    const res = await fetch(`${h.url}/graphql/stream`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json', Accept: 'text/event-stream' },
      body: JSON.stringify({ query: SUB, variables: { id } }),
    });
    assert.is(res.status, 200);
    let text = '';
    const decoder = new TextDecoder();
    const reader = res.body!.getReader();
    const ended = (async () => {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return 'ended';
        text += decoder.decode(value, { stream: true });
      }
    })().catch(() => 'error');
    // The replayed events arrived: the stream is open and live.
    for (let i = 0; i < 200 && !text.includes('"run.started"'); i++) await new Promise((r) => setTimeout(r, 10));
    assert.match(text, '"run.started"', 'the replay reached the client');
    await h.close();
    closed = true;
    assert.is(await ended, 'ended', 'the stream ended cleanly');
    assert.match(text, /\nretry: 1000\n\n$/, `the last frame is the retry hint: ${JSON.stringify(text.slice(-80))}`);
  } finally {
    if (!closed) await h.close();
  }
});

test.run();
