import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startPeerApp, startTestApp, type TestApp } from '../helpers/app.ts';
import { startService } from '../helpers/service-process.ts';
import { HOLD_ACCEPTANCES, RUNS_ACCEPTANCE } from '../helpers/held-acceptances.ts';
import type { App } from '../../src/app.ts';
import { hashApiKey } from '../../src/security/crypto.ts';

/**
 * POST /runs/batch across processes on one Postgres server: a batch whose process is killed (-9) in the
 * middle of its acceptance, retried with its Idempotency-Key, gives every item exactly once; two
 * processes' batches crossing one key's spend cap never exceed it.
 */

const W_SUMMARY = 'aaaaaaaa-0000-4000-8000-000000000001';
const SERVER = Boolean(process.env.DATABASE_URL);
const ENCRYPTION_KEY = randomBytes(32).toString('hex');

const t = suite<{ t: TestApp; peer: { app: App; base: string } }>('POST /runs/batch across processes');
t.before(async (ctx) => {
  if (!SERVER) return;
  // The retry's process must name the killed one's idempotency records: one sealing key.
  ctx.t = await startTestApp({ env: { ENCRYPTION_KEY } });
  ctx.peer = await startPeerApp(undefined, { ENCRYPTION_KEY });
});
t.after(async (ctx) => {
  await ctx.peer?.app.close();
  await ctx.t?.close();
});

const sql = <T = any>(t: TestApp, text: string, params: unknown[] = []) => t.deps.orm.em.fork().execute<T[]>(text, params);
const items = (n: number, tag: string) => Array.from({ length: n }, (_, i) => ({ workflow: W_SUMMARY, inputs: { topic: `${tag}-${i}` } }));

/** The accept_runs statements waiting for a lock (held: test/helpers/held-acceptances.ts), by backend pid. */
const waitingAcceptances = async (t: TestApp) =>
  (await sql<{ pid: number }>(t, `select pid from pg_stat_activity where pid <> pg_backend_pid() and ${RUNS_ACCEPTANCE} and wait_event_type = 'Lock'`)).map(
    (r) => r.pid,
  );

/**
 * Sends a 1,000-run batch to a fresh `npm start`, holds acceptances so its acceptance waits in
 * Postgres, kills the process with SIGKILL there, then `after(pids)` decides the statement's fate
 * before acceptances are let go.
 */
async function killMidAcceptance(t: TestApp, key: string, body: unknown, after: (pids: number[]) => Promise<void>): Promise<void> {
  const svc = startService({
    DATABASE_URL: process.env.DATABASE_URL!,
    ENCRYPTION_KEY,
    INTERNAL_API_TOKEN: 'batch-processes-internal-token',
    CATALOG_FILE: 'none',
    DATA_DIR: mkdtempSync(join(tmpdir(), 'wr-batch-kill-')),
    ENGINE: 'embedded',
    HOST: '127.0.0.1',
  });
  try {
    await sendAndKill(t, await svc.url, svc.child, key, body, after);
  } finally {
    await svc.stop();
  }
  // The statement, if it still runs, finishes once acceptances are let go.
  for (
    let i = 0;
    i < 200 && (await sql(t, `select 1 from pg_stat_activity where pid <> pg_backend_pid() and ${RUNS_ACCEPTANCE} and state = 'active'`)).length;
    i++
  ) {
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Holds acceptances while the batch's acceptance waits, kills the process, lets `after` decide, lets acceptances go. */
async function sendAndKill(t: TestApp, base: string, child: ChildProcess, key: string, body: unknown, after: (pids: number[]) => Promise<void>) {
  await t.deps.orm.em.fork().transactional(async (tx) => {
    await tx.execute(HOLD_ACCEPTANCES);
    const sent = fetch(`${base}/v1/runs/batch`, {
      method: 'POST',
      headers: { authorization: 'Bearer wr_test_bob', 'content-type': 'application/json', 'idempotency-key': key },
      body: JSON.stringify(body),
    }).catch(() => null);
    let pids: number[] = [];
    for (let i = 0; i < 400 && pids.length === 0; i++) {
      await new Promise((r) => setTimeout(r, 50));
      pids = await waitingAcceptances(t);
    }
    assert.is(pids.length, 1, 'the acceptance waits in Postgres');
    child.kill('SIGKILL');
    assert.is(await sent, null, 'the process died before answering');
    await after(pids);
  });
}

/** Retries the batch in-process: every item exactly once, nothing created twice, and a second retry answers the same. */
async function retryGivesEachOnce(t: TestApp, key: string, body: { runs: unknown[] }, runsBefore: number): Promise<void> {
  const retry = await t.call('POST', '/runs/batch', { body, headers: { 'idempotency-key': key } });
  assert.is(retry.status, 202);
  assert.is(retry.body.accepted, body.runs.length);
  const ids: string[] = retry.body.items.map((i: any) => i.run.id);
  assert.is(new Set(ids).size, ids.length);
  const [n] = await sql(t, 'select count(*)::int as n from runs');
  assert.is(Number(n.n), runsBefore + body.runs.length, 'each item once');
  const [inputs] = await sql(t, `select count(distinct inputs->>'topic')::int as n from runs where id in (?)`, [ids]);
  assert.is(Number(inputs.n), body.runs.length);
  const again = await t.call('POST', '/runs/batch', { body, headers: { 'idempotency-key': key } });
  assert.equal(again.body, retry.body);
}

t('killed (-9) while its acceptance waits, the statement dying with it: the retry creates every item once', async ({ t }) => {
  if (!SERVER) return void console.log('  (skipped: needs a Postgres server)');
  const body = { runs: items(1000, 'killed') };
  const before = Number((await sql(t, 'select count(*)::int as n from runs'))[0].n);
  await killMidAcceptance(t, 'killed-batch', body, async (pids) => {
    await sql(t, 'select pg_terminate_backend(?)', [pids[0]]);
  });
  assert.is(Number((await sql(t, 'select count(*)::int as n from runs'))[0].n), before, 'nothing was written');
  await retryGivesEachOnce(t, 'killed-batch', body, before);
});

t('killed (-9) while its acceptance waits, the statement left to Postgres: all or none written, the retry gives each once', async ({ t }) => {
  if (!SERVER) return void console.log('  (skipped: needs a Postgres server)');
  const body = { runs: items(1000, 'orphaned') };
  const before = Number((await sql(t, 'select count(*)::int as n from runs'))[0].n);
  await killMidAcceptance(t, 'orphaned-batch', body, async () => {});
  // Postgres commits it or rolls it back when it finds its client gone: never a part.
  const written = Number((await sql(t, 'select count(*)::int as n from runs'))[0].n) - before;
  assert.ok(written === 0 || written === 1000, `${written} runs written`);
  await retryGivesEachOnce(t, 'orphaned-batch', body, before);
});

t("two processes' batches crossing one key's spend cap: never over it, each batch refused from an index on", async ({ t, peer }) => {
  if (!SERVER) return void console.log('  (skipped: needs a Postgres server)');
  const capped = 'wr_test_bob_capped'; // $0.50 a day
  await sql(t, `delete from purchases where account_id = (select id from accounts where handle = 'bob') and workflow_id = ?`, [W_SUMMARY]);
  await sql(t, 'update workflows set price_usd = 0.01 where id = ?', [W_SUMMARY]);
  const send = (base: string, tag: string) =>
    fetch(`${base}/runs/batch`, {
      method: 'POST',
      headers: { authorization: `Bearer ${capped}`, 'content-type': 'application/json' },
      body: JSON.stringify({ runs: items(40, tag) }),
    }).then(async (r) => ({ status: r.status, body: (await r.json()) as any }));
  const answers = await Promise.all([send(t.base, 'a'), send(peer.base, 'b')]);
  for (const a of answers) assert.is(a.status, 202);
  const accepted = answers.reduce((n, a) => n + a.body.accepted, 0);
  const [reserved] = await sql(
    t,
    `select sum(cap_usd)::text as usd, max(cap_usd)::text as price, count(*)::int as n from runs where api_key_id = (select id from api_keys where key_hash = ?)`,
    [hashApiKey(capped)],
  );
  assert.is(Number(reserved.n), accepted);
  // Exact decimals: never over the cap, and one more run would not have fitted.
  assert.ok(Number(reserved.usd) <= 0.5, `reserved ${reserved.usd}`);
  assert.ok(Number(reserved.usd) + Number(reserved.price) > 0.5, `reserved ${reserved.usd} of 0.50 at ${reserved.price} a run`);
  assert.ok(accepted < 80, 'some were refused');
  for (const a of answers) {
    const codes = a.body.items.map((i: any) => i.error?.code ?? 'run');
    const first = codes.indexOf('spend_cap_reached');
    if (first >= 0)
      assert.ok(
        codes.slice(first).every((c: string) => c === 'spend_cap_reached'),
        codes.join(','),
      );
  }
});

t.run();
