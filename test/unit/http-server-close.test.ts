import pino from 'pino';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { HttpServer } from '../../src/http/server.ts';

// Shutdown hooks end long-lived responses with a reconnect hint (docs/operations.md#start-and-stop). An
// adapter built by a request still in flight when close() begins (GraphQL is built on demand) adds its
// hook late: it must run too, or its streams would wait for the grace period's cut.

test('a shutdown hook added before close() runs when it begins; one added after runs at once', async () => {
  const http = new HttpServer(pino({ level: 'silent' }));
  await http.listen(0, '127.0.0.1');
  const ran: string[] = [];
  http.onClose(() => ran.push('before'));
  assert.equal(ran, [], 'nothing runs before close()');
  const closing = http.close(1000);
  assert.equal(ran, ['before'], 'close() runs the hooks as it begins');
  http.onClose(() => ran.push('late'));
  assert.equal(ran, ['before', 'late'], 'a hook added once close() began runs at once');
  await closing;
});

test.run();
