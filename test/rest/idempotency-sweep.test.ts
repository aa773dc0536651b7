import { randomUUID } from 'node:crypto';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import pg from 'pg';
import { timeOrderedUuid, uuidAtTime } from '../../src/domain/ids.ts';
import { DELETE_EXPIRED_IDEMPOTENCY_RECORDS } from '../../src/sql/idempotency-records.ts';
import { IdempotencySweeper } from '../../src/runs/idempotency-sweeper.ts';
import { hashApiKey } from '../../src/security/crypto.ts';
import { startPeerApp, startTestApp, type TestApp } from '../helpers/app.ts';
import { waitFor } from '../helpers/wait-for.ts';

/**
 * Expired idempotency records are deleted by a sweep over their time-ordered ids
 * (src/runs/idempotency-sweeper.ts), and nothing a client sees changes: a live key replays, an
 * expired or swept key starts a new run.
 */

const W_SUMMARY = 'aaaaaaaa-0000-4000-8000-000000000001';
const DAY_MS = 24 * 3_600_000;

const t = suite<{ t: TestApp; sweeper: IdempotencySweeper }>('idempotency records: the sweep');
t.before(async (ctx) => {
  ctx.t = await startTestApp();
  // The sweeps here are the tests' own, counted: the service's timer would race them.
  await ctx.t.app.idempotency.stop();
  // More requests than the key's default limit of a minute (before its first request: keys are cached).
  await sql(ctx.t, 'update api_keys set rate_limit_per_minute = 100000 where key_hash = ?', [hashApiKey('wr_test_alice')]);
  ctx.sweeper = new IdempotencySweeper({ orm: ctx.t.deps.orm, log: ctx.t.deps.log });
});
t.after(async (ctx) => ctx.t.close());

const sql = <T = Record<string, unknown>>(t: TestApp, text: string, params: unknown[] = []) => t.deps.orm.em.fork().execute<T[]>(text, params);

const post = (t: TestApp, key: string, topic = key) =>
  t.call('POST', '/runs', { key: 'wr_test_alice', body: { workflow: W_SUMMARY, inputs: { topic } }, headers: { 'idempotency-key': key } });

/** The record of `key` as if written more than a day ago: expired, its id from that time. */
async function age(t: TestApp, key: string): Promise<string> {
  const id = timeOrderedUuid(Date.now() - DAY_MS - 60_000);
  await sql(
    t,
    `update idempotency_records set id = ?, created_at = now() - interval '1 day 1 minute', expires_at = now() - interval '1 minute' where key = ?`,
    [id, key],
  );
  return id;
}

const record = async (t: TestApp, key: string) =>
  (await sql<{ id: string; run_id: string }>(t, 'select id, run_id from idempotency_records where key = ?', [key]))[0];

t('a record is written with a time-ordered id: version 7, led by the millisecond it was made', async ({ t }) => {
  const before = Date.now();
  const res = await post(t, 'ordered-1');
  const after = Date.now();
  assert.is(res.status, 202);
  const { id } = (await record(t, 'ordered-1'))!;
  assert.is(id[14], '7', `version nibble of ${id}`);
  const ms = parseInt(id.replace(/-/g, '').slice(0, 12), 16);
  assert.ok(ms >= before && ms <= after, `${id} carries ${ms}, outside ${before}–${after}`);
});

t('a sweep deletes expired records and keeps live ones; a live key still replays, a swept key starts a new run', async ({ t, sweeper }) => {
  const live = await post(t, 'sweep-live');
  const old = await post(t, 'sweep-old');
  await age(t, 'sweep-old');
  const deleted = await sweeper.sweep();
  assert.ok(deleted >= 1, `deleted ${deleted}`);
  assert.is(await record(t, 'sweep-old'), undefined);
  assert.is((await record(t, 'sweep-live'))?.run_id, live.body.run.id);

  const replay = await post(t, 'sweep-live');
  assert.is(replay.status, 202);
  assert.is(replay.body.run.id, live.body.run.id);
  assert.is(replay.headers.get('idempotent-replayed'), 'true');
  const again = await post(t, 'sweep-old');
  assert.is(again.status, 202);
  assert.is.not(again.body.run.id, old.body.run.id);
  assert.is(again.headers.get('idempotent-replayed'), null);
  assert.is((await record(t, 'sweep-old'))?.run_id, again.body.run.id);
});

t('an expired record that is not yet a day old by its id is kept until a later sweep, and still answers as expired', async ({ t, sweeper }) => {
  const first = await post(t, 'sweep-young');
  await sql(t, `update idempotency_records set expires_at = now() - interval '1 second' where key = 'sweep-young'`);
  await sweeper.sweep();
  assert.ok(await record(t, 'sweep-young'), 'a record is found by its id: this one is a minute old by it');
  await sweeper.sweep(Date.now() + DAY_MS + 60_000);
  assert.is(await record(t, 'sweep-young'), undefined, 'a day later by the clock, it is swept');
  const second = await post(t, 'sweep-young');
  assert.is.not(second.body.run.id, first.body.run.id);
});

/** A record as written before ids were time-ordered: a random id of the given first hex digits. */
async function legacy(t: TestApp, key: string, prefix: string, expired: boolean): Promise<void> {
  const run = await post(t, `${key}-anchor`);
  const [{ account_id }] = await sql<{ account_id: string }>(t, 'select account_id from runs where id = ?', [run.body.run.id]);
  const id = `${prefix}${randomUUID().slice(prefix.length)}`;
  await sql(
    t,
    `insert into idempotency_records (id, account_id, key, fingerprint, run_id, created_at, expires_at) values (?, ?, ?, 'f', ?, now(), now() + ?::interval)`,
    [id, account_id, key, run.body.run.id, expired ? '-1 minute' : '1 hour'],
  );
}

t('records with random ids, written before ids were time-ordered, are swept once expired', async ({ t, sweeper }) => {
  // A random id nearly always sorts above any time-ordered one of this century; rarely below.
  await legacy(t, 'legacy-high-expired', 'f', true);
  await legacy(t, 'legacy-low-expired', '00', true);
  await legacy(t, 'legacy-high-live', 'e', false);
  await sweeper.sweep();
  assert.is(await record(t, 'legacy-high-expired'), undefined);
  assert.is(await record(t, 'legacy-low-expired'), undefined);
  assert.ok(await record(t, 'legacy-high-live'));
});

t('a sweep reads a few batches of the random ids and the next sweep goes on from there', async ({ t }) => {
  await sql(t, `delete from idempotency_records where id > ?`, [uuidAtTime(Date.now() + DAY_MS)]);
  const sweeper = new IdempotencySweeper({ orm: t.deps.orm, log: t.deps.log }, { batch: 2, legacyBatches: 1 });
  // In id order: live, expired, live, expired, live, expired.
  for (const [i, expired] of [false, true, false, true, false, true].entries()) await legacy(t, `resume-${i}`, `f${i}`, expired);
  const left = async () =>
    (await sql<{ n: number }>(t, `select count(*)::int as n from idempotency_records where key like 'resume-%' and key not like '%-anchor'`))[0]!.n;
  await sweeper.sweep();
  assert.is(await left(), 5, 'the first sweep looked at the first two');
  await sweeper.sweep();
  assert.is(await left(), 4);
  await sweeper.sweep();
  assert.is(await left(), 3, 'every expired one is gone after three sweeps of two');
  await sweeper.sweep();
  assert.is(await left(), 3, 'and the next sweeps start over, deleting nothing alive');
});

t('a sweep deletes in batches until none of the expired records is left', async ({ t }) => {
  const sweeper = new IdempotencySweeper({ orm: t.deps.orm, log: t.deps.log }, { batch: 3 });
  for (let i = 0; i < 7; i++) {
    assert.is((await post(t, `batch-${i}`)).status, 202);
    await age(t, `batch-${i}`);
  }
  assert.ok((await sweeper.sweep()) >= 7);
  const [{ n }] = await sql<{ n: number }>(t, `select count(*)::int as n from idempotency_records where key like 'batch-%'`);
  assert.is(n, 0);
});

t('a key reused while its expired record is swept makes exactly one new run', async ({ t, sweeper }) => {
  for (let round = 0; round < 5; round++) {
    const key = `race-sweep-${round}`;
    const first = await post(t, key, 'race');
    await age(t, key);
    const [, ...answers] = await Promise.all([sweeper.sweep(), ...Array.from({ length: 6 }, () => post(t, key, 'race'))]);
    assert.ok(
      answers.every((r) => r.status === 202),
      JSON.stringify(answers.map((r) => r.status)),
    );
    const ids = new Set(answers.map((r) => r.body.run.id));
    assert.is(ids.size, 1, `one run for the key in round ${round}`);
    assert.ok(!ids.has(first.body.run.id), 'not the expired one');
    assert.is((await record(t, key))?.run_id, [...ids][0]);
  }
});

if (process.env.DATABASE_URL) {
  const url = process.env.DATABASE_URL;
  t('a sweep skips a record an open transaction holds, without waiting for it, and deletes it later', async ({ t, sweeper }) => {
    await post(t, 'held');
    await age(t, 'held');
    const holder = new pg.Client({ connectionString: url });
    await holder.connect();
    try {
      await holder.query('begin');
      await holder.query(`select id from idempotency_records where key = 'held' for update`);
      const sweep = sweeper.sweep();
      const waited = await Promise.race([sweep.then(() => false), new Promise<boolean>((r) => setTimeout(() => r(true), 3_000))]);
      assert.not.ok(waited, 'the sweep did not wait for the lock');
      assert.ok(await record(t, 'held'), 'the held record is still there');
      await holder.query('commit');
      await sweeper.sweep();
      assert.is(await record(t, 'held'), undefined);
    } finally {
      await holder.end();
    }
  });

  t("an acceptance that meets a sweep's uncommitted delete waits for it, then starts one new run", async ({ t }) => {
    const first = await post(t, 'deleting');
    await age(t, 'deleting');
    const sweeping = new pg.Client({ connectionString: url });
    await sweeping.connect();
    try {
      await sweeping.query('begin');
      const { rows } = await sweeping.query(DELETE_EXPIRED_IDEMPOTENCY_RECORDS.text, [uuidAtTime(0), uuidAtTime(Date.now() - DAY_MS), 500]);
      assert.ok(rows[0].deleted >= 1);
      const answers = Promise.all([post(t, 'deleting'), post(t, 'deleting')]);
      await new Promise((r) => setTimeout(r, 300));
      await sweeping.query('commit');
      const [a, b] = await answers;
      assert.is(a.status, 202);
      assert.is(b.status, 202);
      assert.is(a.body.run.id, b.body.run.id);
      assert.is.not(a.body.run.id, first.body.run.id);
      assert.is((await record(t, 'deleting'))?.run_id, a.body.run.id);
    } finally {
      await sweeping.end();
    }
  });
} else {
  console.log(
    '  idempotency records: the sweep beside open transactions SKIPPED — needs a Postgres server (DATABASE_URL); embedded PGlite runs one transaction at a time',
  );
}

t("the service's own sweep runs shortly after it starts", async ({ t }) => {
  await post(t, 'own-sweep');
  await age(t, 'own-sweep');
  // Another process on the same database (no reset): its first sweep comes 1–3 s after it listens.
  const peer = await startPeerApp();
  try {
    await waitFor('the expired record deleted by the other process', async () => (await record(t, 'own-sweep')) === undefined, 15_000);
  } finally {
    await peer.app.close();
  }
});

t.run();
