import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startDevServer } from '../../src/engine/temporal/dev-server.ts';

/**
 * Starting the Temporal dev server (src/engine/temporal/dev-server.ts) with a stand-in CLI that exits at
 * once, as a server that cannot bind its port does: no real server is needed to see what the caller is told.
 */

const t = suite<{ dir: string; cli: string; calls: string }>('the Temporal dev server that exits at start');
t.before((ctx) => {
  ctx.dir = mkdtempSync(join(tmpdir(), 'wr-dev-server-'));
  ctx.calls = join(ctx.dir, 'calls');
  ctx.cli = join(ctx.dir, 'temporal');
  writeFileSync(ctx.cli, `#!/bin/sh\necho "$*" >> '${ctx.calls}'\necho "listen tcp: bind: address already in use" >&2\nexit 1\n`);
  chmodSync(ctx.cli, 0o755);
});
t.after(({ dir }) => rmSync(dir, { recursive: true, force: true }));
t.before.each(({ calls }) => writeFileSync(calls, ''));

const ports = (calls: string) =>
  readFileSync(calls, 'utf8')
    .trim()
    .split('\n')
    .map((line) => line.match(/--port (\d+)/)?.[1]);

t('on a port it picked, it is started again on another port, three times in all, and the error carries what the server said', async ({ cli, calls }) => {
  const error = await startDevServer({ cli }).then(
    () => null,
    (e: unknown) => e as Error,
  );
  assert.ok(error, 'it never answered, so starting it fails');
  assert.match(error.message, /exited at start/);
  assert.match(error.message, /address already in use/);
  const tried = ports(calls);
  assert.is(tried.length, 3);
  assert.is(new Set(tried).size, 3, `three different ports: ${tried.join(', ')}`);
});

t('on a port it was given, it is not started again', async ({ cli, calls }) => {
  const error = await startDevServer({ cli, port: 1 }).then(
    () => null,
    (e: unknown) => e as Error,
  );
  assert.match(String(error?.message), /exited at start.*address already in use/s);
  assert.equal(ports(calls), ['1']);
});

t.run();
