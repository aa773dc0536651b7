import { randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { Orm } from '../../src/db/orm.ts';
import { createLogger } from '../../src/logger.ts';
import { Sealer } from '../../src/security/crypto.ts';
import { claimDueDeliveries, deliverDueWebhooks, WEBHOOK_BACKOFF_MS, type WebhookDeps } from '../../src/services/webhooks/deliver-webhooks.ts';
import { enqueueRunWebhooks } from '../helpers/outbox.ts';
import { mapRunRow, toPublicRun } from '../../src/runs/run-row.ts';
import { query } from '../../src/db/statement.ts';
import { FIND_RUN } from '../../src/sql/runs.ts';
import { WebhookDispatcher } from '../../src/services/webhooks/webhook-dispatcher.ts';
import { resetDb, testOrm } from '../helpers/db.ts';
import { waitFor } from '../helpers/wait-for.ts';

// ---------------------------------------------------------------------------------------------------
// A real HTTP receiver on 127.0.0.1 whose answers are scripted per request.

interface Received {
  headers: http.IncomingHttpHeaders;
  body: string;
  at: number;
}

type Answer = number | 'hang' | { status: number; delayMs: number };

interface Receiver {
  url: string;
  received: Received[];
  /** Answers for the next requests, in order; when empty, 200. */
  answers: Answer[];
  close(): Promise<void>;
}

async function startReceiver(): Promise<Receiver> {
  const received: Received[] = [];
  const answers: Answer[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), at: Date.now() });
      const answer = answers.shift() ?? 200;
      if (answer === 'hang') return; // never answers; the sender's timeout must fire
      const [status, delay] = typeof answer === 'number' ? [answer, 0] : [answer.status, answer.delayMs];
      setTimeout(() => res.writeHead(status, { 'content-type': 'text/plain' }).end('ok'), delay);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    received,
    answers,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

// ---------------------------------------------------------------------------------------------------
// Fixtures: account, workflow, version, run, endpoint and the outbox rows written by enqueueRunWebhooks.

const sealer = new Sealer(randomBytes(32));
const log = createLogger('silent');
let orm: Orm;

function depsWith(config: Partial<WebhookDeps['config']> = {}): WebhookDeps {
  return { orm, log, sealer, config: { webhookAllowInsecure: true, allowPrivateNetwork: true, ...config } };
}

function newSecret(): string {
  return `whsec_${randomBytes(24).toString('base64')}`;
}

interface Fixture {
  accountId: string;
  runId: string;
  secret: string;
  endpointId: string;
}

async function seed(url: string, opts: { deliveries?: number } = {}): Promise<Fixture> {
  const em = orm.em.fork();
  const accountId = randomUUID();
  const workflowId = randomUUID();
  const versionId = randomUUID();
  const runId = randomUUID();
  const endpointId = randomUUID();
  const secret = newSecret();
  await em.execute('insert into accounts (id, handle) values (?, ?)', [accountId, `acct-${accountId.slice(0, 8)}`]);
  await em.execute(
    `insert into workflows (id, owner_id, name, run_model, listing, credential_mode) values (?, ?, 'Hook test', 'free', 'public', 'service_hosted')`,
    [workflowId, accountId],
  );
  await em.execute(`insert into workflow_versions (id, workflow_id, label, graph, graph_hash) values (?, ?, 'v1', '{}', ?)`, [
    versionId,
    workflowId,
    'a'.repeat(64),
  ]);
  await em.execute(
    `insert into runs (id, account_id, workflow_id, version_id, status, outcome, billing_status, charge_usd, user_access, compute_limit_usd,
                       credential_mode, inputs, progress, outputs, started_at, completed_at)
     values (?, ?, ?, ?, 'completed', 'completed', 'settled', '0.250300', 'owned', '5', 'service_hosted', '{}', '{}', ?, now(), clock_timestamp())`,
    [runId, accountId, workflowId, versionId, JSON.stringify([{ nodeId: 'out', name: 'Out', type: 'text', value: 'ünïcode ✓' }])],
  );
  await em.execute('insert into webhook_endpoints (id, account_id, url, secret_ciphertext) values (?, ?, ?, ?)', [
    endpointId,
    accountId,
    url,
    sealer.seal(secret),
  ]);
  const n = opts.deliveries ?? 1;
  await em.transactional(async (tx) => {
    for (let i = 0; i < n; i++) {
      await enqueueRunWebhooks(tx as never, accountId, runId, 'run.completed');
    }
  });
  return { accountId, runId, secret, endpointId };
}

interface Row {
  id: string;
  created_at: Date;
  status: string;
  attempts: number;
  next_attempt_at: Date;
  last_status_code: number | null;
  last_error: string | null;
  delivered_at: Date | null;
}

async function rows(): Promise<Row[]> {
  const raw = await orm.em.fork().execute<Record<string, unknown>[]>('select * from webhook_deliveries order by created_at, id');
  const date = (v: unknown) => (v === null || v === undefined ? null : new Date(v instanceof Date ? v : String(v).replace(' ', 'T').replace(/\+00$/, 'Z')));
  return raw.map((r) => ({
    id: String(r.id),
    created_at: date(r.created_at)!,
    status: String(r.status),
    attempts: Number(r.attempts),
    next_attempt_at: date(r.next_attempt_at)!,
    last_status_code: r.last_status_code === null ? null : Number(r.last_status_code),
    last_error: (r.last_error as string | null) ?? null,
    delivered_at: date(r.delivered_at),
  }));
}

async function onlyRow(): Promise<Row> {
  const all = await rows();
  assert.is(all.length, 1);
  return all[0]!;
}

function headerRecord(h: http.IncomingHttpHeaders): Record<string, string> {
  return Object.fromEntries(Object.entries(h).map(([k, v]) => [k, Array.isArray(v) ? v.join(', ') : String(v)]));
}

function assertNoSecret(row: Row, secret: string): void {
  const key = secret.replace(/^whsec_/, '');
  const text = row.last_error ?? '';
  assert.not.ok(text.includes(secret), 'the secret leaked');
  assert.not.ok(text.includes(key), 'the secret key leaked');
}

const later = (ms: number) => new Date(Date.now() + ms);

test.before(async () => {
  orm = await testOrm();
});

test.before.each(async () => {
  await resetDb(orm);
});

// ---------------------------------------------------------------------------------------------------

/** The body a delivery of `runId` written at `at` must carry: the run as GET /runs/{id} shows it (FIND_RUN, toPublicRun). */
async function expectedBody(runId: string, at: Date): Promise<string> {
  const [run] = await query(orm.em.fork() as never, FIND_RUN, [runId]);
  return JSON.stringify({ type: 'run.completed', timestamp: at.toISOString(), data: toPublicRun(mapRunRow(run!), null) });
}

test('a due delivery is posted once with the run as the API shows it and Standard Webhooks headers', async () => {
  const rx = await startReceiver();
  try {
    const fx = await seed(rx.url);
    const before = await onlyRow();
    const t0 = Math.floor(Date.now() / 1000);
    const n = await deliverDueWebhooks(depsWith(), { limit: 10 });
    assert.is(n, 1);
    assert.is(rx.received.length, 1);
    const got = rx.received[0]!;
    assert.is(got.body, await expectedBody(fx.runId, before.created_at), 'the body is the run as GET /runs/{id} shows it, byte for byte');
    assert.match(got.body, 'ünïcode ✓');
    assert.is(got.headers['content-type'], 'application/json');
    assert.is(got.headers['webhook-id'], before.id);
    assert.match(before.id, /^msg_[0-9a-f]{32}$/);
    const ts = Number(got.headers['webhook-timestamp']);
    assert.ok(Number.isInteger(ts) && ts >= t0 && ts <= t0 + 5, `timestamp ${ts} is this attempt's unix seconds`);
    assert.match(String(got.headers['webhook-signature']), /^v1,[A-Za-z0-9+/]+=*$/);

    const parsed = new Webhook(fx.secret).verify(got.body, headerRecord(got.headers)) as { type: string; timestamp: string; data: { id: string } };
    assert.is(parsed.type, 'run.completed');
    assert.is(parsed.data.id, fx.runId);
    assert.throws(() => new Webhook(newSecret()).verify(got.body, headerRecord(got.headers)), 'another secret does not verify');

    const after = await onlyRow();
    assert.is(after.status, 'delivered');
    assert.is(after.attempts, 1);
    assert.is(after.last_status_code, 200);
    assert.is(after.last_error, null);
    assert.ok(after.delivered_at instanceof Date);

    assert.is(await deliverDueWebhooks(depsWith(), { limit: 10 }), 0, 'a delivered row is not sent again');
    assert.is(rx.received.length, 1);
  } finally {
    await rx.close();
  }
});

test('a 500 then a 200 is retried with the same webhook-id and a later timestamp', async () => {
  const rx = await startReceiver();
  rx.answers.push(500, 200);
  const dispatcher = new WebhookDispatcher(depsWith(), { backoffMs: [1000, 1000], intervalMs: 50 });
  try {
    const fx = await seed(rx.url);
    dispatcher.start();
    await waitFor('the retry to be delivered', async () => (await onlyRow()).status === 'delivered');
    assert.is(rx.received.length, 2);
    const [first, second] = rx.received as [Received, Received];
    assert.is(first.headers['webhook-id'], second.headers['webhook-id']);
    assert.ok(Number(second.headers['webhook-timestamp']) > Number(first.headers['webhook-timestamp']), 'the retry carries a later timestamp');
    assert.is(first.body, second.body, 'every attempt sends the same bytes');
    assert.ok(second.at - first.at >= 1000, 'the retry waited for the backoff');
    for (const r of rx.received) new Webhook(fx.secret).verify(r.body, headerRecord(r.headers));
    const row = await onlyRow();
    assert.is(row.attempts, 2);
    assert.is(row.last_status_code, 200);
    assert.is(row.last_error, null);
  } finally {
    await dispatcher.stop();
    await rx.close();
  }
});

test('failures follow the contract schedule and the attempt after the last backoff is final', async () => {
  assert.equal([...WEBHOOK_BACKOFF_MS], [5_000, 30_000, 120_000, 600_000, 3_600_000, 21_600_000]);
  const rx = await startReceiver();
  try {
    const fx = await seed(rx.url);
    rx.answers.push(...Array<number>(10).fill(500));
    let now = later(0);
    for (const [i, wait] of WEBHOOK_BACKOFF_MS.entries()) {
      assert.is(await deliverDueWebhooks(depsWith(), { limit: 10, now }), 1);
      const row = await onlyRow();
      assert.is(row.status, 'pending');
      assert.is(row.attempts, i + 1);
      assert.is(row.last_status_code, 500);
      assert.match(row.last_error ?? '', '500');
      assert.is(row.next_attempt_at.getTime() - now.getTime(), wait, `backoff after attempt ${i + 1}`);
      assert.is(await deliverDueWebhooks(depsWith(), { limit: 10, now: new Date(now.getTime() + wait - 1) }), 0, 'not due before its backoff');
      now = new Date(now.getTime() + wait);
    }
    assert.is(await deliverDueWebhooks(depsWith(), { limit: 10, now }), 1);
    const row = await onlyRow();
    assert.is(row.status, 'failed');
    assert.is(row.attempts, WEBHOOK_BACKOFF_MS.length + 1);
    assert.is(rx.received.length, WEBHOOK_BACKOFF_MS.length + 1);
    assert.is(new Set(rx.received.map((r) => r.headers['webhook-id'])).size, 1);
    assertNoSecret(row, fx.secret);
    assert.is(await deliverDueWebhooks(depsWith(), { limit: 10, now: new Date(now.getTime() + 86_400_000) }), 0, 'a failed row stays failed');
  } finally {
    await rx.close();
  }
});

test('a short injected schedule exhausts into failed', async () => {
  const rx = await startReceiver();
  rx.answers.push(503, 503, 503, 503);
  const dispatcher = new WebhookDispatcher(depsWith(), { backoffMs: [10, 10], intervalMs: 20 });
  try {
    const fx = await seed(rx.url);
    dispatcher.start();
    await waitFor('the delivery to fail', async () => (await onlyRow()).status === 'failed');
    const row = await onlyRow();
    assert.is(row.attempts, 3);
    assert.is(row.last_status_code, 503);
    assert.is(rx.received.length, 3);
    assertNoSecret(row, fx.secret);
  } finally {
    await dispatcher.stop();
    await rx.close();
  }
});

test('a timeout and a refused connection are retried, with a short error and no secret', async () => {
  const rx = await startReceiver();
  rx.answers.push('hang');
  try {
    const fx = await seed(rx.url);
    const started = Date.now();
    assert.is(await deliverDueWebhooks(depsWith(), { limit: 10, timeoutMs: 200 }), 1);
    assert.ok(Date.now() - started < 2000, 'the timeout bounds the attempt');
    let row = await onlyRow();
    assert.is(row.status, 'pending');
    assert.is(row.attempts, 1);
    assert.is(row.last_status_code, null);
    assert.match(row.last_error ?? '', /timeout/);
    assertNoSecret(row, fx.secret);

    await rx.close(); // nothing listens on the port any more
    assert.is(await deliverDueWebhooks(depsWith(), { limit: 10, now: later(6000) }), 1);
    row = await onlyRow();
    assert.is(row.status, 'pending');
    assert.is(row.attempts, 2);
    assert.match(row.last_error ?? '', /ECONNREFUSED/);
    assert.ok((row.last_error ?? '').length <= 200);
    assertNoSecret(row, fx.secret);
  } finally {
    await rx.close().catch(() => undefined);
  }
});

test('an http:// endpoint is refused when insecure webhooks are not allowed', async () => {
  const rx = await startReceiver();
  try {
    const fx = await seed(rx.url);
    assert.is(await deliverDueWebhooks(depsWith({ webhookAllowInsecure: false, allowPrivateNetwork: true }), { limit: 10 }), 1);
    const row = await onlyRow();
    assert.is(row.status, 'failed', 'a policy refusal is permanent');
    assert.match(row.last_error ?? '', /https/);
    assert.is(rx.received.length, 0, 'nothing was sent');
    assertNoSecret(row, fx.secret);
  } finally {
    await rx.close();
  }
});

test('a loopback endpoint is refused when private networks are not allowed', async () => {
  const rx = await startReceiver();
  try {
    await seed(rx.url);
    const ipv6 = rx.url.replace('127.0.0.1', '[::1]');
    await orm.em.fork().execute(
      `insert into webhook_endpoints (id, account_id, url, secret_ciphertext)
      select ?, account_id, ?, secret_ciphertext from webhook_endpoints limit 1`,
      [randomUUID(), ipv6],
    );
    const [{ account_id: accountId, run_id: runId }] = await orm.em
      .fork()
      .execute<{ account_id: string; run_id: string }[]>('select r.account_id, r.id as run_id from runs r limit 1');
    await orm.em.fork().execute(
      `insert into webhook_deliveries (id, endpoint_id, run_id, event_type, status, attempts, next_attempt_at)
       select 'msg_v6', e.id, ?, 'run.completed', 'pending', 0, now() from webhook_endpoints e where e.url = ? and e.account_id = ?`,
      [runId, ipv6, accountId],
    );
    assert.is(await deliverDueWebhooks(depsWith({ webhookAllowInsecure: true, allowPrivateNetwork: false }), { limit: 10 }), 2);
    const all = await rows();
    assert.is(all.length, 2);
    for (const row of all) {
      assert.is(row.status, 'failed');
      assert.match(row.last_error ?? '', /blocked: .*private/);
    }
    assert.is(rx.received.length, 0, 'nothing was sent');
  } finally {
    await rx.close();
  }
});

test('pending deliveries survive a restart: a new dispatcher sends what the old one left', async () => {
  const rx = await startReceiver();
  rx.answers.push(500);
  const first = new WebhookDispatcher(depsWith(), { backoffMs: [300], intervalMs: 10_000 });
  try {
    await seed(rx.url, { deliveries: 3 });
    first.start();
    await waitFor('the first attempts', async () => (await rows()).every((r) => r.attempts >= 1));
    await first.stop();
    const leftBehind = (await rows()).filter((r) => r.status === 'pending');
    assert.is(leftBehind.length, 1, 'the 500 left one row pending');
    const idBefore = leftBehind[0]!.id;

    // "Restart": a fresh instance with fresh deps over the same database.
    const second = new WebhookDispatcher(depsWith(), { backoffMs: [300], intervalMs: 50 });
    second.start();
    try {
      await waitFor('everything delivered', async () => (await rows()).every((r) => r.status === 'delivered'));
    } finally {
      await second.stop();
    }
    const ids = rx.received.map((r) => String(r.headers['webhook-id']));
    assert.is(ids.length, 4);
    assert.is(ids.filter((id) => id === idBefore).length, 2, 'the retried row kept its webhook-id');
    assert.is(new Set(ids).size, 3);
  } finally {
    await first.stop();
    await rx.close();
  }
});

test('a delivery claimed by a crashed worker is sent again once its lease passes', async () => {
  const rx = await startReceiver();
  try {
    const fx = await seed(rx.url);
    // The "crashed" worker claims and never sends or records anything.
    const claimed = await claimDueDeliveries(depsWith(), { limit: 10, leaseMs: 60_000 });
    assert.is(claimed.length, 1);
    assert.is(claimed[0]!.attempts, 0);
    assert.is(sealer.open(claimed[0]!.secretCiphertext), fx.secret);
    let row = await onlyRow();
    assert.is(row.status, 'pending');
    assert.ok(row.next_attempt_at.getTime() > Date.now() + 50_000, 'the lease pushed next_attempt_at forward');

    assert.is(await deliverDueWebhooks(depsWith(), { limit: 10 }), 0, 'a leased row is not claimed twice');
    assert.is(rx.received.length, 0);

    assert.is(await deliverDueWebhooks(depsWith(), { limit: 10, now: later(61_000) }), 1, 'after the lease it is due again');
    row = await onlyRow();
    assert.is(row.status, 'delivered');
    assert.is(row.attempts, 1, 'the crashed claim did not count as an attempt');
    assert.is(rx.received.length, 1);
    assert.is(rx.received[0]!.headers['webhook-id'], row.id);
  } finally {
    await rx.close();
  }
});

test('concurrent workers each send a row once', async () => {
  const rx = await startReceiver();
  try {
    await seed(rx.url, { deliveries: 9 });
    const counts = await Promise.all([1, 2, 3].map(() => deliverDueWebhooks(depsWith(), { limit: 4 })));
    const more = await deliverDueWebhooks(depsWith(), { limit: 10 });
    assert.is(counts.reduce((a, b) => a + b, 0) + more, 9);
    const ids = rx.received.map((r) => String(r.headers['webhook-id']));
    assert.is(ids.length, 9);
    assert.is(new Set(ids).size, 9, 'no row was sent twice');
    assert.ok((await rows()).every((r) => r.status === 'delivered' && r.attempts === 1));
  } finally {
    await rx.close();
  }
});

test('notify sends at once without waiting for the timer, and stop waits for the send in flight', async () => {
  const rx = await startReceiver();
  const dispatcher = new WebhookDispatcher(depsWith(), { intervalMs: 60_000 });
  try {
    dispatcher.start();
    await new Promise((r) => setTimeout(r, 100)); // the start batch has found nothing
    rx.answers.push({ status: 204, delayMs: 400 });
    await seed(rx.url);
    const t0 = Date.now();
    dispatcher.notify();
    await waitFor('the request to arrive', () => rx.received.length === 1, 2000);
    assert.ok(Date.now() - t0 < 1000, 'sent promptly on notify');
    assert.is((await onlyRow()).status, 'pending', 'the receiver has not answered yet');
    await dispatcher.stop();
    const row = await onlyRow();
    assert.is(row.status, 'delivered', 'stop waited for the answer');
    assert.is(row.last_status_code, 204);
    assert.not.ok(dispatcher.running);
    dispatcher.notify(); // ignored after stop
  } finally {
    await dispatcher.stop();
    await rx.close();
  }
});

test('stop is bounded: a send still hanging is aborted and keeps its lease for a later retry', async () => {
  const rx = await startReceiver();
  rx.answers.push('hang');
  const dispatcher = new WebhookDispatcher(depsWith(), { stopTimeoutMs: 150, leaseMs: 30_000 });
  try {
    await seed(rx.url);
    dispatcher.start();
    await waitFor('the request to arrive', () => rx.received.length === 1, 2000);
    const t0 = Date.now();
    await dispatcher.stop();
    assert.ok(Date.now() - t0 < 2000, 'stop returned within its bound');
    const row = await onlyRow();
    assert.is(row.status, 'pending');
    assert.is(row.attempts, 0, 'the aborted send was not recorded');
    assert.ok(row.next_attempt_at.getTime() > Date.now() + 20_000, 'the lease still holds the row');
    assert.is(await deliverDueWebhooks(depsWith(), { limit: 10, now: later(31_000) }), 1);
    assert.is((await onlyRow()).status, 'delivered');
  } finally {
    await dispatcher.stop();
    await rx.close();
  }
});

test.run();
