import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { startService } from '../helpers/service-process.ts';

/** `npm start` as a real process: boots, migrates, loads the demo catalog, answers, and stops on SIGTERM. */

test('npm start boots with the demo catalog, answers /readyz and the demo key, and stops cleanly on SIGTERM', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'wr-boot-'));
  const svc = startService({ DATA_DIR: dir });
  try {
    const url = await svc.url;
    const ready = await fetch(`${url}/readyz`);
    assert.is(ready.status, 200);
    const list = await fetch(`${url}/v1/workflows`, { headers: { authorization: 'Bearer wr_demo_key' } });
    assert.is(list.status, 200);
    assert.ok(((await list.json()) as any).workflows.length > 0);
    assert.match(svc.output(), 'demo API key: wr_demo_key');
    assert.match(svc.output(), /internal GraphQL token \(generated/);
    // Logs are JSON lines.
    const jsonLine = svc
      .output()
      .split('\n')
      .find((l) => l.startsWith('{'));
    assert.ok(jsonLine && JSON.parse(jsonLine).service === 'workflow-run-api');
    const exited = new Promise<number | null>((r) => svc.child.on('exit', (code) => r(code)));
    svc.child.kill('SIGTERM');
    assert.is(await exited, 0);
    assert.not.match(svc.output(), 'wr_demo_readonly');
  } finally {
    svc.child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a bad variable fails the start with its name and a non-zero exit', async () => {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    env: { ...process.env, PORT: 'eighty', DATABASE_URL: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr.on('data', (b: Buffer) => (err += b.toString()));
  const code = await new Promise<number | null>((r) => child.on('exit', r));
  assert.is(code, 2);
  assert.match(err, 'PORT');
});

test.run();
