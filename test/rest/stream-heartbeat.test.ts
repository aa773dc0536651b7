import { suite } from 'uvu';
import * as assert from 'uvu/assert';
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
