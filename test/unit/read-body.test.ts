import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { type ApiError } from '../../src/domain/errors.ts';
import { readBody } from '../../src/http/respond.ts';

/** readBody on a real node:http server: what each request's body read gave, or the error it threw. */

type Outcome = { text: string } | { error: ApiError };

const t = suite<{ server: Server; port: number; outcomes: Outcome[]; limit: number; readTwice: boolean; readAfterClose: boolean }>(
  'Request bodies read with a size limit',
);

t.before(async (ctx) => {
  ctx.outcomes = [];
  ctx.limit = 64;
  ctx.readTwice = false;
  ctx.readAfterClose = false;
  ctx.server = createServer(async (req: IncomingMessage, res) => {
    if (ctx.readAfterClose) await new Promise((resolve) => req.once('close', resolve));
    readBody(req, ctx.limit)
      .then(async (text) => {
        ctx.outcomes.push({ text });
        const again = ctx.readTwice ? await readBody(req, ctx.limit) : '';
        res.end(JSON.stringify({ length: text.length, again }));
      })
      .catch((error: ApiError) => {
        ctx.outcomes.push({ error });
        if (!res.writableEnded && !res.destroyed) {
          res.statusCode = error.status;
          res.end(JSON.stringify({ code: error.code }));
        }
      });
  });
  await new Promise<void>((resolve) => ctx.server.listen(0, '127.0.0.1', resolve));
  ctx.port = (ctx.server.address() as AddressInfo).port;
});
t.after(async (ctx) => {
  await new Promise<void>((resolve) => ctx.server.close(() => resolve()));
});
t.before.each((ctx) => {
  ctx.outcomes.length = 0;
  ctx.limit = 64;
  ctx.readTwice = false;
  ctx.readAfterClose = false;
});

/** POSTs `chunks` with chunked transfer encoding, each written in its own tick. */
function post(port: number, chunks: Buffer[]): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/', headers: { 'transfer-encoding': 'chunked' } }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode!, body }));
    });
    req.on('error', reject);
    const next = (i: number) => {
      if (i === chunks.length) return void req.end();
      req.write(chunks[i]);
      setImmediate(() => next(i + 1));
    };
    next(0);
  });
}

/** Sends a request announcing 50 bytes of body, only part of it, then closes the connection. */
async function sendHalfThenLeave(port: number): Promise<void> {
  const socket = connect(port, '127.0.0.1');
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  socket.write('POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{"name":');
  await new Promise((r) => setTimeout(r, 50));
  socket.destroy();
}

const until = async (check: () => boolean, what: string) => {
  for (let i = 0; i < 200 && !check(); i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(check(), `timed out waiting for ${what}`);
};

t('a body sent in several chunks is read whole, a character split between two chunks included', async (ctx) => {
  const whole = Buffer.from('{"name":"Zoë ☃"}', 'utf8');
  const cut = whole.indexOf(Buffer.from('☃', 'utf8')) + 1;
  const res = await post(ctx.port, [whole.subarray(0, 5), whole.subarray(5, cut), whole.subarray(cut)]);
  assert.is(res.status, 200);
  assert.equal(ctx.outcomes, [{ text: '{"name":"Zoë ☃"}' }]);
});

t('a body over the limit while it is read is refused with payload_too_large, and the answer still reaches the client', async (ctx) => {
  const res = await post(ctx.port, [Buffer.alloc(40, 'a'), Buffer.alloc(40, 'b'), Buffer.alloc(4096, 'c')]);
  assert.is(res.status, 413);
  assert.is(JSON.parse(res.body).code, 'payload_too_large');
  const [o] = ctx.outcomes;
  assert.ok(o && 'error' in o && o.error.code === 'payload_too_large');
});

t('a body of exactly the limit is accepted', async (ctx) => {
  const res = await post(ctx.port, [Buffer.alloc(30, 'a'), Buffer.alloc(34, 'b')]);
  assert.is(res.status, 200);
  assert.is(JSON.parse(res.body).length, 64);
});

t('a client that goes away mid-body gets the read refused as invalid_request instead of a read that never ends', async (ctx) => {
  await sendHalfThenLeave(ctx.port);
  await until(() => ctx.outcomes.length === 1, 'the read to end');
  const [o] = ctx.outcomes;
  assert.ok(o && 'error' in o, 'the read was not refused');
  assert.is((o as { error: ApiError }).error.code, 'invalid_request');
  assert.match((o as { error: ApiError }).error.message, /not received completely/);
});

t('a request already closed when its body is read is refused as invalid_request at once', async (ctx) => {
  ctx.readAfterClose = true;
  await sendHalfThenLeave(ctx.port);
  await until(() => ctx.outcomes.length === 1, 'the read to end');
  const [o] = ctx.outcomes;
  assert.ok(o && 'error' in o && o.error.code === 'invalid_request', 'the read was not refused');
});

t('a body already read to its end reads as empty instead of waiting forever', async (ctx) => {
  ctx.readTwice = true;
  const res = await post(ctx.port, [Buffer.from('{"a":1}')]);
  assert.is(res.status, 200);
  assert.equal(JSON.parse(res.body), { length: 7, again: '' });
});

t.run();
