import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { Orm } from '../../src/db/orm.ts';
import { inOneMessage } from '../../src/db/group-commit.ts';
import { query, statement, type Statement } from '../../src/db/statement.ts';
import { ACCEPTANCES_TOGETHER } from '../../src/services/runs/acceptances-together.ts';
import { TRY_LOCK_ADMISSION_FOR_ACCEPTANCES } from '../../src/sql/admit-queued.ts';
import { acceptRunFor } from '../../src/sql/accept-run.ts';
import { viewTokenOf } from '../../src/sql/workflows.ts';
import { resetDb, testOrm } from '../helpers/db.ts';

/**
 * A group of acceptances as ONE statement (ACCEPT_RUN_MANY, through ACCEPTANCES_TOGETHER) against the
 * same acceptances as single statements one after another in one transaction, as a group commit sends
 * them otherwise: twin worlds (keys with and without limits and windows part full, idempotency records
 * new, replayed, conflicting and expired, fresh and stale view tokens, admission on and off with
 * capacities and account limits, runs already queued or in flight) must end with the same rows and every
 * acceptance with the same answer. The one statement may raise only when one by one some acceptance was
 * over its key's limit (the group then runs again statement by statement).
 */

const t = suite<{ orm: Orm }>('a group of acceptances as one statement');
t.before(async (ctx) => {
  ctx.orm = await testOrm();
});
t.before.each(async ({ orm }) => resetDb(orm));

const VIEW_TOKEN = statement('test_view_token', `select ${viewTokenOf('$1', '$2')} as token`);

interface KeySpec {
  limit: number | null;
  /** Requests already in its window this second, or null: no window row. */
  window: number | null;
  /** The window row's second is this many seconds old. */
  age: number;
}
interface AccountSpec {
  max: number | null;
  flying: number;
  keys: KeySpec[];
}
interface AcceptSpec {
  account: number;
  key: number;
  /** None, a new key (of four names: the same name twice is one record), or a record that exists. */
  idempotency: 'none' | 'k0' | 'k1' | 'k2' | 'k3' | 'replay' | 'conflict' | 'expired';
  token: 'none' | 'fresh' | 'stale';
  traced: boolean;
}
interface World {
  accounts: AccountSpec[];
  admission: { capacity: number; queued: boolean } | null;
  accepts: AcceptSpec[];
}

const keySpec = fc.record<KeySpec>({
  limit: fc.constantFrom(null, 1, 2, 3, 5, 100),
  window: fc.constantFrom(null, null, 0, 1, 2, 4),
  age: fc.constantFrom(0, 0, 0, 1, 30, 70),
});
const accountSpec = fc.record<AccountSpec>({
  max: fc.constantFrom(null, null, 1, 2, 3),
  flying: fc.integer({ min: 0, max: 2 }),
  keys: fc.array(keySpec, { minLength: 1, maxLength: 2 }),
});
const world: fc.Arbitrary<World> = fc
  .record({
    accounts: fc.array(accountSpec, { minLength: 1, maxLength: 3 }),
    admission: fc.option(fc.record({ capacity: fc.integer({ min: 0, max: 7 }), queued: fc.integer({ min: 0, max: 4 }).map((n) => n === 0) }), { freq: 3 }),
  })
  .chain((w) =>
    fc.record({
      accounts: fc.constant(w.accounts),
      admission: fc.constant(w.admission),
      accepts: fc.array(
        fc.integer({ min: 0, max: w.accounts.length - 1 }).chain((account) =>
          fc.record<AcceptSpec>({
            account: fc.constant(account),
            key: fc.integer({ min: 0, max: w.accounts[account]!.keys.length - 1 }),
            idempotency: fc.constantFrom('none', 'none', 'k0', 'k1', 'k2', 'k3', 'replay', 'conflict', 'expired'),
            token: fc.constantFrom('none', 'fresh', 'fresh', 'fresh', 'stale'),
            traced: fc.boolean(),
          }),
        ),
        { minLength: 2, maxLength: 8 },
      ),
    }),
  );

interface Built {
  accounts: string[];
  keys: string[][];
  workflow: string;
  version: string;
  token: string;
  /** Runs that exist before the acceptances (in flight, queued, or an existing record's run). */
  before: string[];
  /** The acceptances' run ids, in the world's order. */
  runs: string[];
  /** The existing record's run of each acceptance that replays, conflicts or finds its record expired. */
  recorded: (string | null)[];
}

const ENGINE = 'embedded';
const insertRun = (em: ReturnType<Orm['em']['fork']>, b: { workflow: string; version: string }, id: string, account: string, key: string, phase: string) =>
  em.execute(
    `insert into runs (id, account_id, api_key_id, workflow_id, version_id, status, phase, user_access, displayed_price_usd, creator_price_usd, step_usd,
                       compute_limit_usd, credential_mode, inputs, progress, last_sequence, engine)
     values (?, ?, ?, ?, ?, 'pending', ?, 'owned', 0, 0, 0.0001, 5, 'service_hosted', '{}', '{"results":{},"timers":{}}', 1, ?)`,
    [id, account, key, b.workflow, b.version, phase, ENGINE],
  );

async function build(orm: Orm, w: World): Promise<Built> {
  const em = orm.em.fork();
  const b: Built = { accounts: [], keys: [], workflow: randomUUID(), version: randomUUID(), token: '', before: [], runs: [], recorded: [] };
  for (const a of w.accounts) {
    const id = randomUUID();
    await em.execute('insert into accounts (id, handle, max_concurrent_runs) values (?, ?, ?)', [id, `a${id.slice(0, 8)}`, a.max]);
    const keys: string[] = [];
    for (const k of a.keys) {
      const keyId = randomUUID();
      await em.execute(`insert into api_keys (id, account_id, key_hash, prefix, scopes, rate_limit_per_minute) values (?, ?, ?, 'wr_test', '["run:execute"]', ?)`, [
        keyId, id, randomUUID().replaceAll('-', ''), k.limit ?? 60,
      ]);
      if (k.window !== null) {
        await em.execute(
          `insert into api_key_rate_windows (api_key_id, second, counts, total, total_second, allowed)
           select ?, s, array_fill(0, array[59]) || ?::int, ?, s, true from (select floor(extract(epoch from now()))::bigint - ? as s) x`,
          [keyId, k.window, k.window, k.age],
        );
      }
      keys.push(keyId);
    }
    b.accounts.push(id);
    b.keys.push(keys);
  }
  const owner = b.accounts[0]!;
  await em.execute(`insert into workflows (id, owner_id, name, run_model, listing, credential_mode, api_access) values (?, ?, 'w', 'per_run', 'public', 'service_hosted', true)`, [b.workflow, owner]);
  await em.execute(`insert into workflow_versions (id, workflow_id, label, graph, graph_hash) values (?, ?, 'v1', '{"nodes":[]}', ?)`, [b.version, b.workflow, 'x'.repeat(64)]);
  await em.execute('update workflows set active_version_id = ? where id = ?', [b.version, b.workflow]);
  for (const [i, a] of w.accounts.entries()) {
    for (let n = 0; n < a.flying; n++) {
      const id = randomUUID();
      await insertRun(em, b, id, b.accounts[i]!, b.keys[i]![0]!, 'starting');
      b.before.push(id);
    }
  }
  if (w.admission?.queued) {
    const id = randomUUID();
    await insertRun(em, b, id, owner, b.keys[0]![0]!, 'queued');
    b.before.push(id);
  }
  for (const [i, s] of w.accepts.entries()) {
    b.runs.push(randomUUID());
    let recorded: string | null = null;
    if (s.idempotency === 'replay' || s.idempotency === 'conflict' || s.idempotency === 'expired') {
      recorded = randomUUID();
      const account = b.accounts[s.account]!;
      await insertRun(em, b, recorded, account, b.keys[s.account]![s.key]!, 'queued');
      await em.execute(`update runs set status = 'completed', phase = 'queued' where id = ?`, [recorded]);
      await em.execute(
        `insert into idempotency_records (id, account_id, key, fingerprint, run_id, created_at, expires_at)
         values (?, ?, ?, ?, ?, now() - interval '1 hour', now() + ?::interval)`,
        [randomUUID(), account, `own-${i}`, s.idempotency === 'conflict' ? 'other' : fingerprint(i), recorded, s.idempotency === 'expired' ? '-1 minute' : '1 hour'],
      );
      b.before.push(recorded);
    }
    b.recorded.push(recorded);
  }
  const [row] = await query<{ token: string }>(em, VIEW_TOKEN, [owner, b.workflow]);
  b.token = row!.token;
  return b;
}

const fingerprint = (i: number) => `fp${i % 3}`;

/** ACCEPT_RUN's values for acceptance `i` (as src/services/runs/accept-run.ts builds them). */
function values(w: World, b: Built, i: number): unknown[] {
  const s = w.accepts[i]!;
  const key = w.accounts[s.account]!.keys[s.key]!;
  const idempotencyKey = s.idempotency === 'none' ? null : s.idempotency.startsWith('k') ? s.idempotency : `own-${i}`;
  // The accounts other than the owner see the public workflow; the owner sees it as owned.
  return [
    b.runs[i], b.accounts[s.account], b.keys[s.account]![s.key], b.workflow, b.version, '0.100000', 'owned', '0.050000', '0.000100', '5.000000',
    'service_hosted', JSON.stringify({ name: `it's "${i}"\\` }), ENGINE, idempotencyKey, fingerprint(i), randomUUID(), null, null, [], [], [],
    s.traced ? JSON.stringify({ traceparent: `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01` }) : null,
    s.token === 'none' ? null : s.token === 'fresh' ? b.token : 'stale',
    key.limit,
  ];
}

/** The world's acceptances in the order a group sends them (by API key), as indices. */
const groupOrder = (w: World, b: Built) =>
  w.accepts.map((s, i) => [b.keys[s.account]![s.key]!, i] as const).sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : x[1] - y[1])).map(([, i]) => i);

function head(w: World): (readonly [Statement, readonly unknown[]])[] {
  return w.admission ? [[TRY_LOCK_ADMISSION_FOR_ACCEPTANCES, [w.admission.capacity, ENGINE, 'test-owner', 30]]] : [];
}

/** What every acceptance answered and what the world holds, with ids replaced by names. */
async function snapshot(orm: Orm, w: World, b: Built, answers: Record<string, unknown>[]) {
  const em = orm.em.fork();
  const names = new Map<string, string>([
    ...b.before.map((id, i) => [id, `before ${i}`] as const),
    ...b.runs.map((id, i) => [id, `run ${i}`] as const),
    ...b.recorded.flatMap((id, i) => (id ? [[id, `recorded ${i}`] as const] : [])),
    ...b.accounts.map((id, i) => [id, `account ${i}`] as const),
    ...b.keys.flatMap((ks, i) => ks.map((id, j) => [id, `key ${i}.${j}`] as const)),
    [b.workflow, 'workflow'],
    [b.version, 'version'],
  ]);
  const name = (v: unknown) => (v == null ? v : (names.get(String(v)) ?? String(v)));
  const ids = [...b.runs, ...b.before];
  const runs = await em.execute(
    `select id, account_id, api_key_id, status, phase, cap_usd::text, displayed_price_usd::text, creator_price_usd::text, step_usd::text,
            compute_limit_usd::text, credential_mode, user_access, inputs::text, progress::text, outputs::text, engine, last_sequence,
            lease_owner, lease_until is not null as leased, trace_context::text
       from runs where id in (?)`,
    [ids],
  );
  const events = await em.execute(`select run_id, sequence, type, node_id, data::text from run_events where run_id in (?)`, [ids]);
  const records = await em.execute(`select account_id, key, fingerprint, run_id from idempotency_records`);
  const windows = await em.execute(`select api_key_id, total, allowed from api_key_rate_windows`);
  const byName = (xs: Record<string, unknown>[]): Record<string, unknown>[] =>
    xs.map((x) => Object.fromEntries(Object.entries(x).map(([k, v]) => [k, k.endsWith('id') ? name(v) : v]))).sort((x, y) => JSON.stringify(x).localeCompare(JSON.stringify(y)));
  return {
    answers: answers.map((a): Record<string, unknown> => {
      const { oldest_ms, now_ms, ...rest } = a;
      return { ...byName([rest])[0], timed: oldest_ms != null && now_ms != null };
    }),
    runs: byName(runs),
    events: byName(events),
    records: byName(records),
    windows: byName(windows),
  };
}

const isRefusal = (e: unknown) => (e as { code?: unknown }).code === 'WR001';

t('the one statement leaves the rows and answers of the statements one after another, or raises when one of them was over its limit', async ({ orm }) => {
  const seed = Number(process.env.FC_SEED ?? Date.now() % 2 ** 31);
  const seen = { together: 0, raised: 0, declined: 0, admitted: 0, queued: 0, replayed: 0 };
  await fc.assert(
    fc.asyncProperty(world, async (w) => {
      await resetDb(orm);
      const a = await build(orm, w);
      const order = groupOrder(w, a);
      const single = order.map((i) => values(w, a, i));
      const combined = ACCEPTANCES_TOGETHER.combine(single, []);
      const claims = order.map((i) => `${w.accepts[i]!.account}:${String(values(w, a, i)[13])}`).filter((c) => !c.endsWith(':null'));
      if (new Set(claims).size < claims.length) {
        assert.is(combined, null, 'an idempotency key twice in a group goes statement by statement');
        seen.declined++;
        return;
      }
      assert.ok(combined, 'a group without caps and sealed inputs goes as one statement');
      // One after another, in one transaction, as a group commit sends single statements.
      const results = await inOneMessage(orm.em.fork(), [...head(w), ...single.map((v) => [acceptRunFor({ hit: v[23] != null, cap: false, secrets: false }), v] as const)]);
      const oneByOne: Record<string, unknown>[] = new Array(w.accepts.length);
      for (const [k, i] of order.entries()) oneByOne[i] = results[head(w).length + k]![0]!;
      const x = await snapshot(orm, w, a, oneByOne);

      await resetDb(orm);
      const b = await build(orm, w);
      const again = order.map((i) => values(w, b, i));
      const [s, v] = ACCEPTANCES_TOGETHER.combine(again, [])!;
      let rows: Record<string, unknown>[];
      try {
        rows = (await inOneMessage(orm.em.fork(), [...head(w), [s, v]])).at(-1)!;
      } catch (e) {
        if (!isRefusal(e)) throw e;
        assert.ok(x.answers.some((r) => r.allowed === false), 'the one statement raised although one by one no acceptance was over its limit');
        seen.raised++;
        return;
      }
      const split = ACCEPTANCES_TOGETHER.split(rows, again.length);
      const together: Record<string, unknown>[] = new Array(w.accepts.length);
      for (const [k, i] of order.entries()) together[i] = (split[k] as Record<string, unknown>[])[0]!;
      assert.equal(await snapshot(orm, w, b, together), x);
      seen.together++;
      if (x.runs.some((r) => r.phase === 'starting' && String(r.id).startsWith('run'))) seen.admitted++;
      if (x.runs.some((r) => r.phase === 'queued' && String(r.id).startsWith('run'))) seen.queued++;
      if (x.answers.some((r) => r.run_id && !r.inserted)) seen.replayed++;
    }),
    { numRuns: 120, seed },
  );
  const counts = `${JSON.stringify(seen)} (FC_SEED=${seed})`;
  assert.ok(seen.together >= 20, counts);
  assert.ok(seen.raised >= 1, counts);
  assert.ok(seen.admitted >= 3 && seen.queued >= 3 && seen.replayed >= 3, counts);
});

t('a group goes statement by statement with a spend cap, sealed inputs, two engines, one key twice or two limits of a key', () => {
  const v = (o: { key?: string; apiKey?: string; cap?: boolean; secrets?: boolean; engine?: string; limit?: number | null } = {}) => {
    const row: unknown[] = new Array(24).fill(null);
    row[0] = randomUUID();
    row[1] = 'acct';
    row[2] = o.apiKey ?? 'key';
    row[12] = o.engine ?? ENGINE;
    row[13] = o.key ?? null;
    row[16] = o.cap ? new Date().toISOString() : null;
    row[17] = o.cap ? '1.00' : null;
    row[18] = o.secrets ? [randomUUID()] : [];
    row[23] = o.limit === undefined ? 10 : o.limit;
    return row;
  };
  assert.ok(ACCEPTANCES_TOGETHER.combine([v(), v({ key: 'a' }), v({ key: 'b' })], []));
  assert.is(ACCEPTANCES_TOGETHER.combine([v(), v({ cap: true })], []), null, 'a spend cap');
  assert.is(ACCEPTANCES_TOGETHER.combine([v(), v({ secrets: true })], []), null, 'sealed inputs');
  assert.is(ACCEPTANCES_TOGETHER.combine([v(), v({ engine: 'temporal' })], []), null, 'two engines');
  assert.is(ACCEPTANCES_TOGETHER.combine([v({ key: 'a' }), v({ key: 'a' })], []), null, 'one idempotency key twice');
  assert.is(ACCEPTANCES_TOGETHER.combine([v({ limit: 10 }), v({ limit: 11 })], []), null, 'two limits of one key');
  assert.ok(ACCEPTANCES_TOGETHER.combine([v({ limit: 10 }), v({ apiKey: 'other', limit: 11 })], []), 'two keys, a limit each');
});

t('a key whose window the one statement could not take goes statement by statement for a while; other failures are not remembered', () => {
  const v = (apiKey: string) => {
    const row: unknown[] = new Array(24).fill(null);
    row[0] = randomUUID();
    row[2] = apiKey;
    row[12] = ENGINE;
    row[18] = [];
    row[23] = 5;
    return row;
  };
  const [full, other] = [randomUUID(), randomUUID()];
  ACCEPTANCES_TOGETHER.failed!(Object.assign(new Error('deadlock detected'), { code: '40P01' }), [full]);
  assert.ok(ACCEPTANCES_TOGETHER.combine([v(full), v(other)], []), 'a deadlock is not remembered');
  ACCEPTANCES_TOGETHER.failed!(Object.assign(new Error('the rate window of an API key cannot take all of its group'), { code: 'WR001' }), [full, full]);
  assert.is(ACCEPTANCES_TOGETHER.combine([v(full), v(other)], []), null, 'the key refused for');
  assert.ok(ACCEPTANCES_TOGETHER.combine([v(other), v(other)], []), 'the other keys’ groups');
});

t.run();
