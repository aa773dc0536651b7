import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { parse, stringify } from 'yaml';
import { createLogger } from '../../src/logger.ts';
import { REST_CATALOG, startTestApp } from '../helpers/app.ts';
import { W_SUMMARY } from '../rest/e2e/helpers/catalog.ts';

/**
 * Run-scoped and request-scoped log lines, captured from the service's real logger (JSON lines): every
 * line about a run carries its runId and accountId, request lines carry the id returned in
 * X-Request-Id, and none carries the API key.
 */

interface Line {
  msg: string;
  level: number;
  runId?: string;
  accountId?: string;
  requestId?: string;
  [k: string]: unknown;
}

test('every log line about a run carries runId and accountId, and request lines carry the X-Request-Id', async () => {
  // bob's webhook endpoint answers 500: the failed delivery is logged (warn) for the run.
  const receiver = createServer((_req, res) => res.writeHead(500).end());
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const catalog = parse(readFileSync(REST_CATALOG, 'utf8'));
  const bob = catalog.accounts.find((a: { handle: string }) => a.handle === 'bob');
  bob.webhooks = [{ url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/bob`, secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' }];
  mkdirSync('.tmp', { recursive: true });
  const file = `.tmp/run-logs-catalog-${process.pid}.yaml`;
  writeFileSync(file, stringify(catalog));

  const raw: string[] = [];
  const log = createLogger('debug', { write: (l: string) => void raw.push(l) });
  const t = await startTestApp({ catalog: file, engine: 'app', log, env: { WEBHOOK_ALLOW_INSECURE: '1', ALLOW_PRIVATE_NETWORK: '1' } });
  try {
    const [acct] = await t.deps.orm.em.fork().execute<{ id: string }[]>(`select id from accounts where handle = 'bob'`);
    const bobId = String(acct!.id);

    const res = await t.call('POST', '/runs', { body: { workflow: W_SUMMARY, inputs: { topic: 'logs' } }, headers: { 'x-request-id': 'req-logs-0001' } });
    assert.is(res.status, 202);
    assert.is(res.headers.get('x-request-id'), 'req-logs-0001');
    const runId = res.body.run.id as string;
    const generated = await t.call('GET', `/runs/${runId}`);
    const generatedId = generated.headers.get('x-request-id')!;
    assert.match(generatedId, /^[0-9a-f-]{36}$/);

    const lines = () => raw.map((l) => JSON.parse(l) as Line);
    const until = Date.now() + 15_000;
    while (!lines().some((l) => l.msg === 'webhook delivery failed' && l.runId === runId)) {
      if (Date.now() > until) throw new Error(`no webhook failure logged:\n${raw.join('')}`);
      await new Promise((r) => setTimeout(r, 50));
    }

    const all = lines();
    const finished = all.find((l) => l.msg === 'run finished' && l.runId === runId);
    assert.ok(finished, 'the run finished line');
    assert.equal([finished!.accountId, finished!.status, finished!.outcome], [bobId, 'completed', 'completed']);
    const hook = all.find((l) => l.msg === 'webhook delivery failed' && l.runId === runId)!;
    assert.is(hook.accountId, bobId);

    // Every line that names a run names its account too.
    const aboutRuns = all.filter((l) => l.runId !== undefined);
    assert.ok(aboutRuns.length >= 2);
    for (const l of aboutRuns) assert.is(l.accountId, bobId, `"${l.msg}" carries the run's accountId`);

    // Request lines: the id the caller sent, or the generated one that was returned.
    const post = all.find((l) => l.msg === 'request completed' && l.route === '/v1/runs' && l.method === 'POST');
    assert.ok(post, 'the POST /runs request line');
    assert.equal([post!.requestId, post!.status], ['req-logs-0001', 202]);
    const get = all.find((l) => l.msg === 'request completed' && l.route === '/v1/runs/{id}');
    assert.is(get?.requestId, generatedId);
    for (const l of all.filter((x) => x.msg === 'request completed')) assert.type(l.requestId, 'string');

    assert.not.ok(raw.join('').includes('wr_test_bob'), 'no API key in the logs');
  } finally {
    await t.close();
    receiver.closeAllConnections();
    await new Promise((r) => receiver.close(r));
    rmSync(file, { force: true });
  }
});

test.run();
