import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { HeartbeatTicker } from '../../src/http/rest/heartbeat-ticker.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';

const t = suite<{ t: TestApp }>('stream heartbeat');
t.before(async (ctx) => {
  ctx.t = await startTestApp({ env: { SSE_HEARTBEAT_MS: '50' } });
});
t.after(async (ctx) => ctx.t.close());

t('an idle stream sends a heartbeat comment at the configured interval', async ({ t }) => {
  const run = await t.call('POST', '/runs', { body: { workflow: 'aaaaaaaa-0000-4000-8000-000000000001', inputs: { topic: 'hb' } } });
  const ac = new AbortController();
  const res = await fetch(`${t.base}/runs/${run.body.run.id}/stream?afterSequence=1`, { headers: { authorization: 'Bearer wr_test_bob' }, signal: ac.signal });
  const reader = res.body!.getReader();
  let text = '';
  const started = Date.now();
  while ((text.match(/: heartbeat\n\n/g) ?? []).length < 2 && Date.now() - started < 3000) {
    const { value } = await reader.read();
    text += new TextDecoder().decode(value);
  }
  ac.abort();
  assert.match(text, /^event: snapshot\n/);
  assert.ok((text.match(/: heartbeat\n\n/g) ?? []).length >= 2);
});

t.run();

// The shared ticker on its own: heartbeats of every stream from one timer, each idle-based.
const k = suite('heartbeat ticker');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const counter = () => {
  const s = { beats: 0, heartbeat: () => void s.beats++ };
  return s;
};

k('idle streams each get a heartbeat every period from the one ticker', async () => {
  const ticker = new HeartbeatTicker(40);
  const a = counter();
  const b = counter();
  ticker.touch(a);
  await sleep(15);
  ticker.touch(b);
  await sleep(150);
  ticker.drop(a);
  ticker.drop(b);
  // ~3 each in 150 ms; a loaded machine may delay a timer, never fire one early.
  assert.ok(a.beats >= 2 && a.beats <= 4, `a got ${a.beats}`);
  assert.ok(b.beats >= 2 && b.beats <= 4, `b got ${b.beats}`);
});

k('a write postpones the next heartbeat by a whole period', async () => {
  const ticker = new HeartbeatTicker(100);
  const busy = counter();
  const idle = counter();
  ticker.touch(busy);
  ticker.touch(idle);
  const until = performance.now() + 350;
  while (performance.now() < until) {
    await sleep(10);
    ticker.touch(busy);
  }
  assert.is(busy.beats, 0, 'a stream written every 10 ms never needs a heartbeat');
  assert.ok(idle.beats >= 2, `the idle one got ${idle.beats}`);
  const lastWrite = performance.now();
  while (busy.beats === 0 && performance.now() - lastWrite < 1000) await sleep(5);
  const after = performance.now() - lastWrite;
  ticker.drop(busy);
  ticker.drop(idle);
  assert.is(busy.beats, 1);
  assert.ok(after >= 95, `the first heartbeat after the last write came after ${after.toFixed(0)} ms`);
});

k('a dropped stream gets no more heartbeats and the ticker stops when none is left', async () => {
  const ticker = new HeartbeatTicker(20);
  const gone = counter();
  const kept = counter();
  ticker.touch(gone);
  ticker.touch(kept);
  ticker.drop(gone);
  await sleep(70);
  assert.is(gone.beats, 0);
  assert.ok(kept.beats >= 1);
  ticker.drop(kept);
  assert.is(ticker.size, 0);
  const beats = kept.beats;
  await sleep(60);
  assert.is(kept.beats, beats);
});

k.run();
