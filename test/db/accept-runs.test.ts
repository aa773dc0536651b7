import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { Batch } from '../../src/db/batch.ts';
import type { Orm } from '../../src/db/orm.ts';
import { outsideTransaction, query, statement } from '../../src/db/statement.ts';
import { timeOrderedUuid } from '../../src/domain/ids.ts';
import { ACCEPT_RUNS, acceptRunsValues, type AcceptedRow, type RunAcceptance } from '../../src/sql/accept-runs.ts';
import { viewTokenOf } from '../../src/sql/workflows.ts';
import { resetDb, testOrm, insertWorkflow } from '../helpers/db.ts';

/**
 * POST /runs's acceptance as one statement over arrays (src/sql/accept-runs.ts): a batch of calls
 * writes and answers what its calls one at a time would (the k-th call of a key in its rate window,
 * the spend cap in call order, idempotency records new, replayed, conflicting and expired, stale view
 * tokens, sealed inputs), and refuses with rows, never by raising.
 */

const t = suite<{ orm: Orm }>('accept_runs: a batch of acceptances as one statement');
t.before(async (ctx) => {
  ctx.orm = await testOrm();
});
t.before.each(async ({ orm }) => resetDb(orm));

const VIEW_TOKEN = statement('test_view_token', `select ${viewTokenOf('$1', '$2')} as token`);
const SERVER = Boolean(process.env.DATABASE_URL);

interface KeySpec {
  /** Per minute, or null: counted before (not here). */
  limit: number | null;
  /** Requests already in its window, or null: no window row. */
  window: number | null;
  /** The key's cap, or null, and what its runs reserved in the window already. */
  cap: string | null;
  reserved: string;
}
interface CallSpec {
  key: number;
  idempotency: 'none' | 'k0' | 'k1' | 'k2' | 'replay' | 'conflict' | 'expired';
  token: 'none' | 'fresh' | 'stale';
  price: string;
  secrets: number;
}
interface World {
  keys: KeySpec[];
  calls: CallSpec[];
}

const world: fc.Arbitrary<World> = fc
  .array(
    fc.record<KeySpec>({
      limit: fc.constantFrom(null, 1, 2, 3, 5, 100),
      window: fc.constantFrom(null, 0, 1, 2, 4),
      cap: fc.constantFrom(null, null, '0.500000', '1.000000'),
      reserved: fc.constantFrom('0', '0.200000', '0.600000'),
    }),
    { minLength: 1, maxLength: 3 },
  )
  .chain((keys) =>
    fc.record({
      keys: fc.constant(keys),
      calls: fc.array(
        fc.record<CallSpec>({
          key: fc.integer({ min: 0, max: keys.length - 1 }),
          idempotency: fc.constantFrom('none', 'none', 'k0', 'k1', 'k2', 'replay', 'conflict', 'expired'),
          token: fc.constantFrom('none', 'fresh', 'fresh', 'stale'),
          price: fc.constantFrom('0.100000', '0.250000', '0.400000'),
          secrets: fc.constantFrom(0, 0, 1, 2),
        }),
        { minLength: 1, maxLength: 8 },
      ),
    }),
  )
  // One idempotency key once per batch (the service's Batch keeps calls sharing one apart).
  .map((w) => ({
    ...w,
    calls: w.calls.map((c, i) => (/^k/.test(c.idempotency) && w.calls.findIndex((d) => d.idempotency === c.idempotency) < i ? none(c) : c)),
  }));

const none = (c: CallSpec): CallSpec => ({ ...c, idempotency: 'none' });

interface Built {
  account: string;
  keys: string[];
  workflow: string;
  version: string;
  token: string;
  names: Map<string, string>;
}

const exec = (orm: Orm, text: string, params: unknown[] = []) => orm.em.fork().execute(text, params);

async function insertRun(orm: Orm, b: Built, id: string, key: string, capUsd: string): Promise<void> {
  await exec(
    orm,
    `insert into runs (id, account_id, api_key_id, workflow_id, version_id, status, phase, user_access, displayed_price_usd, cap_usd, creator_price_usd,
                       step_usd, compute_limit_usd, credential_mode, inputs, progress, last_sequence, engine)
     values (?, ?, ?, ?, ?, 'completed', 'queued', 'owned', 0, ?, 0, 0.0001, 5, 'service_hosted', '{}', '{"results":{},"timers":{}}', 1, 'embedded')`,
    [id, b.account, key, b.workflow, b.version, capUsd],
  );
}

async function build(orm: Orm, w: World): Promise<Built> {
  const b: Built = { account: randomUUID(), keys: [], workflow: randomUUID(), version: randomUUID(), token: '', names: new Map() };
  b.names.set(b.account, 'account');
  await exec(orm, 'insert into accounts (id, handle) values (?, ?)', [b.account, `a${b.account.slice(0, 8)}`]);
  await insertWorkflow(orm.em.fork(), { id: b.workflow, ownerId: b.account, versionId: b.version, runModel: 'per_run', active: true });
  for (const [i, k] of w.keys.entries()) {
    const id = randomUUID();
    b.keys.push(id);
    b.names.set(id, `key ${i}`);
    await exec(
      orm,
      `insert into api_keys (id, account_id, key_hash, prefix, scopes, rate_limit_per_minute) values (?, ?, ?, 'wr_test', '["run:execute"]', ?)`,
      [id, b.account, randomUUID().replaceAll('-', ''), k.limit ?? 60],
    );
    if (k.window !== null) {
      await exec(
        orm,
        `insert into api_key_rate_windows (api_key_id, second, counts, total, total_second, allowed)
         select ?, s, array_fill(0, array[59]) || ?::int, ?, s, true from (select floor(extract(epoch from now()))::bigint as s) x`,
        [id, k.window, k.window],
      );
    }
    if (k.reserved !== '0') {
      const run = randomUUID();
      b.names.set(run, `reserved ${i}`);
      await insertRun(orm, b, run, id, k.reserved);
    }
  }
  for (const [i, c] of w.calls.entries()) {
    if (c.idempotency !== 'replay' && c.idempotency !== 'conflict' && c.idempotency !== 'expired') continue;
    const recorded = randomUUID();
    b.names.set(recorded, `recorded ${i}`);
    await insertRun(orm, b, recorded, b.keys[c.key]!, '0');
    await exec(
      orm,
      `insert into idempotency_records (id, account_id, key, fingerprint, run_id, created_at, expires_at)
       values (?, ?, ?, ?, ?, now() - interval '1 hour', now() + ?::interval)`,
      [randomUUID(), b.account, `own-${i}`, c.idempotency === 'conflict' ? 'other' : `fp${i}`, recorded, c.idempotency === 'expired' ? '-1 minute' : '1 hour'],
    );
  }
  const [row] = await query<{ token: string }>(outsideTransaction(orm), VIEW_TOKEN, [b.account, b.workflow]);
  b.token = row!.token;
  return b;
}

function callsOf(w: World, b: Built): RunAcceptance[] {
  return w.calls.map((c, i) => {
    const key = w.keys[c.key]!;
    const runId = randomUUID();
    b.names.set(runId, `run ${i}`);
    return {
      runId,
      accountId: b.account,
      apiKeyId: b.keys[c.key]!,
      workflowId: b.workflow,
      versionId: b.version,
      priceUsd: c.price,
      userAccess: 'owned',
      creatorPriceUsd: '0.050000',
      stepUsd: '0.000100',
      computeLimitUsd: '5.000000',
      credentialMode: 'service_hosted',
      inputsJson: JSON.stringify({ name: `it's "${i}"\\` }),
      engine: 'embedded',
      idempotencyKey: c.idempotency === 'none' ? null : /^k/.test(c.idempotency) ? c.idempotency : `own-${i}`,
      fingerprint: `fp${i}`,
      recordId: timeOrderedUuid(),
      capUsd: key.cap,
      capSince: key.cap ? new Date(Date.now() - 3_600_000).toISOString() : null,
      traceContext: i % 2 ? JSON.stringify({ traceparent: `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01` }) : null,
      viewToken: c.token === 'none' ? null : c.token === 'fresh' ? b.token : 'stale',
      rateLimit: key.limit,
      metadataJson: JSON.stringify(i % 3 ? {} : { order: `o-${i}`, quote: 'it\'s "q"' }),
      cancelAfterSeconds: i % 2 ? null : 60,
      secrets: Array.from({ length: c.secrets }, (_, s) => ({ id: randomUUID(), name: `secret${s}`, ciphertext: `sealed ${i}.${s}` })),
    };
  });
}

/** What each call answered and what the database holds, ids replaced by names. */
async function snapshot(orm: Orm, b: Built, answers: AcceptedRow[]) {
  const name = (v: unknown) => (v == null ? v : (b.names.get(String(v)) ?? String(v)));
  const named = (rows: Record<string, unknown>[]) =>
    rows
      .map((row) => Object.fromEntries(Object.entries(row).map(([k, v]) => [k, k.endsWith('id') ? name(v) : v])))
      .sort((x, y) => JSON.stringify(x).localeCompare(JSON.stringify(y)));
  const em = orm.em.fork();
  return {
    answers: answers.map(({ oldest_ms, now_ms, ...rest }) => ({ ...named([rest])[0], timed: oldest_ms != null && now_ms != null })),
    runs: named(
      await em.execute(`select id, api_key_id, status, phase, cap_usd::text, displayed_price_usd::text, inputs::text, trace_context::text, lease_owner,
                                 metadata::text, deadline is not null as has_deadline from runs`),
    ),
    events: named(await em.execute(`select run_id, sequence, type, data::text from run_events`)),
    records: named(await em.execute(`select key, fingerprint, run_id from idempotency_records`)),
    secrets: named(await em.execute(`select run_id, name, ciphertext from run_secrets`)),
    windows: named(await em.execute(`select api_key_id, total from api_key_rate_windows`)),
  };
}

const accept = (orm: Orm, calls: RunAcceptance[]) => query<AcceptedRow>(outsideTransaction(orm), ACCEPT_RUNS, acceptRunsValues(calls));

t('a batch writes and answers what its calls one at a time would', async ({ orm }) => {
  const seed = Number(process.env.FC_SEED ?? Date.now() % 2 ** 31);
  const seen = { limited: 0, capped: 0, replayed: 0, conflicted: 0, stale: 0, sealed: 0 };
  await fc.assert(
    fc.asyncProperty(world, async (w) => {
      await resetDb(orm);
      const a = await build(orm, w);
      const alone: AcceptedRow[] = [];
      for (const call of callsOf(w, a)) {
        const rows = await accept(orm, [call]);
        assert.is(rows.length, 1);
        alone.push({ ...rows[0]!, ord: undefined } as AcceptedRow);
      }
      const oneAtATime = await snapshot(orm, a, alone);

      await resetDb(orm);
      const b = await build(orm, w);
      const rows = await accept(orm, callsOf(w, b));
      assert.equal(
        rows.map((row) => Number((row as { ord?: unknown }).ord)),
        w.calls.map((_, i) => i + 1),
        'a row per call, in order',
      );
      const together = await snapshot(
        orm,
        b,
        rows.map((row) => ({ ...row, ord: undefined }) as AcceptedRow),
      );
      assert.equal(together, oneAtATime);
      if (alone.some((r) => r.allowed === false)) seen.limited++;
      if (alone.some((r) => r.over_cap)) seen.capped++;
      if (alone.some((r) => r.run_id && !r.inserted && r.fingerprint?.startsWith('fp'))) seen.replayed++;
      if (alone.some((r) => r.fingerprint === 'other')) seen.conflicted++;
      if (alone.some((r) => r.stale)) seen.stale++;
      if (oneAtATime.secrets.length > 0) seen.sealed++;
    }),
    { numRuns: 60, seed },
  );
  const counts = `${JSON.stringify(seen)} (FC_SEED=${seed})`;
  assert.ok(
    Object.values(seen).every((n) => n >= 3),
    counts,
  );
});

t('the k-th call of a key is allowed while the window before plus k is within the limit; refused calls are not counted', async ({ orm }) => {
  const call: CallSpec = { key: 0, idempotency: 'none', token: 'none', price: '0.100000', secrets: 0 };
  const w: World = { keys: [{ limit: 3, window: 1, cap: null, reserved: '0' }], calls: [call, call, call, call] };
  const b = await build(orm, w);
  const rows = await accept(orm, callsOf(w, b));
  assert.equal(
    rows.map((r) => r.allowed),
    [true, true, false, false],
  );
  assert.equal(
    rows.map((r) => r.counted),
    [2, 3, 3, 3],
  );
  assert.equal(
    rows.map((r) => r.inserted),
    [true, true, false, false],
  );
  const [window] = await exec(orm, 'select total, last_counted from api_key_rate_windows');
  assert.equal(window, { total: 3, last_counted: 2 });
});

t('a spend cap refuses, in call order, each call whose price does not fit after the earlier ones that did', async ({ orm }) => {
  const call = (price: string): CallSpec => ({ key: 0, idempotency: 'none', token: 'none', price, secrets: 0 });
  const key: KeySpec = { limit: null, window: null, cap: '1.000000', reserved: '0.600000' };
  const w: World = { keys: [key], calls: [call('0.250000'), call('0.250000'), call('0.150000')] };
  const b = await build(orm, w);
  const rows = await accept(orm, callsOf(w, b));
  assert.equal(
    rows.map((r) => r.over_cap),
    [false, true, false],
    '0.6 + 0.25 fits, + 0.25 would not, + 0.15 is exactly at the cap',
  );
  const [sum] = await exec(orm, 'select sum(cap_usd)::text as total from runs');
  assert.is(sum!.total, '1.000000');
});

t('calls of one idempotency key arriving together: one run, the others replay it or get its fingerprint', async ({ orm }) => {
  const w: World = { keys: [{ limit: null, window: null, cap: '1.000000', reserved: '0' }], calls: [] };
  const b = await build(orm, w);
  const batch = new Batch<RunAcceptance>({ statement: ACCEPT_RUNS, values: acceptRunsValues, apartKey: (c) => c.idempotencyKey ?? undefined });
  const calls = Array.from({ length: 4 }, (_, i) => ({
    ...callsOf({ keys: w.keys, calls: [{ key: 0, idempotency: 'k0', token: 'fresh', price: '0.400000', secrets: 0 }] }, b)[0]!,
    fingerprint: i === 3 ? 'different' : 'same',
  }));
  const answers = (await Promise.all(calls.map((c) => batch.run(outsideTransaction(orm), c)))).map((rows) => rows[0] as AcceptedRow);
  assert.equal(
    answers.map((a) => a.inserted),
    [true, false, false, false],
  );
  assert.ok(
    answers.every((a) => a.run_id === calls[0]!.runId && a.fingerprint === 'same' && !a.over_cap),
    'a replay reserves nothing',
  );
  const [runs] = await exec(orm, 'select count(*)::int as n from runs');
  assert.is(runs!.n, 1);
});

t('on a Postgres server, concurrent acceptances on one capped key never reserve more than the cap', async ({ orm }) => {
  if (!SERVER) return;
  const w: World = { keys: [{ limit: null, window: null, cap: '1.000000', reserved: '0.200000' }], calls: [] };
  const b = await build(orm, w);
  const one = { key: 0, idempotency: 'none', token: 'none', price: '0.250000', secrets: 0 } as const;
  const calls = callsOf({ keys: w.keys, calls: Array.from({ length: 10 }, () => one) }, b);
  // Each alone on a connection of its own, all at once.
  const answers = (await Promise.all(calls.map((c) => accept(orm, [c])))).map((rows) => rows[0]!);
  assert.is(answers.filter((a) => a.inserted).length, 3, '0.2 + 3 × 0.25 fits under 1.0, a fourth would not');
  assert.is(answers.filter((a) => a.over_cap).length, 7);
});

t.run();
