import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { LOCK_FILE } from '../../src/db/data-dir-lock.ts';
import { runToEnd, startService } from '../helpers/service-process.ts';

/**
 * The embedded database takes one process at a time, as real processes see it: a second `npm start`
 * and a catalog load on a DATA_DIR that a server holds are refused with one line, nothing written; a
 * lock left by a dead process is taken over; a taken port is one line before any migration.
 */

const DEMO = 'catalog/demo.yaml';
const onePlainLine = (text: string) =>
  text
    .trim()
    .split('\n')
    .filter((l) => l.trim() && !l.startsWith('{'));

test('a second npm start and a catalog load on a DATA_DIR held by a running server are refused with one line', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'wr-lock-'));
  const first = startService({ DATA_DIR: dir, DATABASE_URL: '' });
  try {
    await first.url;
    const lock = JSON.parse(readFileSync(join(dir, LOCK_FILE), 'utf8'));
    assert.is(lock.pid, first.child.pid);

    const second = await runToEnd(['src/main.ts'], { DATA_DIR: dir, DATABASE_URL: '', PORT: '0' });
    assert.is(second.code, 2, second.stderr);
    assert.equal(onePlainLine(second.stderr).length, 1, second.stderr);
    assert.match(second.stderr, `is in use by process ${first.child.pid} (npm start`);
    assert.not.match(second.stdout, 'listening on');

    const load = await runToEnd(['src/catalog/cli.ts', 'load', DEMO], { DATA_DIR: dir, DATABASE_URL: '' });
    assert.is(load.code, 1, load.stderr);
    assert.equal(onePlainLine(load.stderr).length, 1, load.stderr);
    assert.match(load.stderr, `not loaded: DATA_DIR ${dir} is in use by process ${first.child.pid} (npm start`);
    assert.match(load.stderr, `CATALOG_FILE=${DEMO}`);
    assert.not.match(load.stdout, 'loaded');

    // The refused processes left the holder's lock alone, and the server still answers.
    assert.is(JSON.parse(readFileSync(join(dir, LOCK_FILE), 'utf8')).pid, first.child.pid);
    const list = await fetch(`${await first.url}/v1/workflows`, { headers: { authorization: 'Bearer wr_demo_key' } });
    assert.is(list.status, 200);

    assert.is(await first.stop(), 0);
    assert.not.ok(existsSync(join(dir, LOCK_FILE)), 'a clean stop removes the lock');
    const after = await runToEnd(['src/catalog/cli.ts', 'load', DEMO], { DATA_DIR: dir, DATABASE_URL: '' });
    assert.is(after.code, 0, after.stderr);
    assert.match(after.stdout, `loaded ${DEMO} into pglite:${dir}`);
    assert.not.ok(existsSync(join(dir, LOCK_FILE)), 'the catalog load released the lock');
  } finally {
    first.child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a lock left by a process that is gone is taken over', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'wr-lock-stale-'));
  try {
    const gone = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
    const deadPid = Number(gone.stdout);
    assert.ok(deadPid > 0);
    writeFileSync(join(dir, LOCK_FILE), JSON.stringify({ pid: deadPid, role: 'npm start', port: 8080, since: '2026-01-01T00:00:00.000Z' }));
    const load = await runToEnd(['src/catalog/cli.ts', 'load', DEMO], { DATA_DIR: dir, DATABASE_URL: '' });
    assert.is(load.code, 0, load.stderr);
    assert.match(load.stdout, 'loaded');
    assert.not.ok(existsSync(join(dir, LOCK_FILE)));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a lock naming a live pid that another process now has (a recycled pid) is taken over', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'wr-lock-recycled-'));
  try {
    // This test process is alive, but it is not the process that wrote the lock: its start time differs.
    writeFileSync(join(dir, LOCK_FILE), JSON.stringify({ pid: process.pid, role: 'npm start', port: 8080, since: '2026-01-01T00:00:00.000Z', startTime: '1' }));
    const load = await runToEnd(['src/catalog/cli.ts', 'load', DEMO], { DATA_DIR: dir, DATABASE_URL: '' });
    assert.is(load.code, 0, load.stderr);
    assert.match(load.stdout, 'loaded');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a port in use ends the start with one line before any migration runs', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'wr-lock-port-'));
  const taken = createServer();
  await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
  const port = (taken.address() as AddressInfo).port;
  try {
    const run = await runToEnd(['src/main.ts'], { DATA_DIR: dir, DATABASE_URL: '', PORT: String(port), HOST: '127.0.0.1' });
    assert.is(run.code, 2, run.stderr);
    assert.equal(onePlainLine(run.stderr), [
      `cannot listen on 127.0.0.1:${port}: the port is already in use (by another server, perhaps another npm start); stop it or set PORT to a free port`,
    ]);
    assert.not.match(run.stderr + run.stdout, 'EADDRINUSE');
    assert.not.match(run.stdout, 'migrations applied');
    assert.not.ok(existsSync(join(dir, 'pg')), 'the database was never opened');
  } finally {
    taken.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test.run();
