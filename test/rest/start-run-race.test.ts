import fc from 'fast-check';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { parse, stringify } from 'yaml';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { REST_CATALOG, startTestApp, type TestApp } from '../helpers/app.ts';
import { messagesWhile } from '../helpers/round-trips.ts';

/**
 * POST /runs is one statement (src/sql/accept-runs.ts): racing requests that share idempotency keys, that
 * reuse a key with another request, and that compete for the last room under a spend cap must still make
 * one run per key, answer 409 only for a different request, and never overspend the cap. The round's
 * requests find Bob's workflow read kept (src/runs/workflow-cache.ts): on a Postgres server the
 * acceptance counts each in the rate window and they are committed in groups; in some rounds the workflow changes under them, so
 * some acceptances find their read stale and read it again.
 */

const W_SUMMARY = 'aaaaaaaa-0000-4000-8000-000000000001';
/** Bob's pinned version of W_SUMMARY: each run reserves this displayed price. */
const PRICE = 0.0001;
const CAP = 0.5;
const BOB = { capped: 'wr_test_bob_capped', open: 'wr_test_bob_exec' } as const;

const t = suite<{ t: TestApp }>('POST /runs under races (property)');
t.before(async (ctx) => {
  // The REST catalog with a rate limit on Bob's two keys that the rounds never reach.
  const doc = parse(readFileSync(REST_CATALOG, 'utf8')) as { accounts: { handle: string; apiKeys: { secret: string; rateLimitPerMinute?: number }[] }[] };
  for (const k of doc.accounts.find((a) => a.handle === 'bob')!.apiKeys) {
    if (k.secret === BOB.capped || k.secret === BOB.open) k.rateLimitPerMinute = 100_000;
  }
  mkdirSync('.tmp', { recursive: true });
  const file = `.tmp/race-catalog-${process.pid}.yaml`;
  writeFileSync(file, stringify(doc));
  ctx.t = await startTestApp({ catalog: file });
});
t.after(async (ctx) => ctx.t.close());

interface Req {
  key: 'capped' | 'open';
  /** Index into the round's idempotency keys, or null for none. */
  idem: number | null;
  /** Which of two requests (two fingerprints) this is. */
  variant: 0 | 1;
}

const scenario = fc.record({
  /** How many more runs fit under the capped key's cap when the round starts. */
  room: fc.integer({ min: 0, max: 4 }),
  /** Whether the workflow changes (its compute limit: in the view token, not in the price) while the requests race. */
  change: fc.boolean(),
  requests: fc.array(
    fc.record({
      key: fc.constantFrom<'capped' | 'open'>('capped', 'open'),
      idem: fc.option(fc.integer({ min: 0, max: 2 }), { nil: null }),
      variant: fc.constantFrom<0 | 1>(0, 1),
    }),
    { minLength: 2, maxLength: 12 },
  ),
});

let round = 0;
let lastFiller: string | null = null;

t('racing keys, fingerprints and a spend cap: one run per key, 409 only for another request, the cap never overspent', async ({ t }) => {
  const sql = <T>(text: string, params: unknown[] = []) => t.deps.orm.em.fork().execute<T[]>(text, params);
  await fc.assert(
    fc.asyncProperty(scenario, async ({ room, change, requests }) => {
      const r = ++round;
      // Bob starts each round with one run on the capped key that leaves room for exactly `room` runs.
      const cappedKeyRuns = `runs where api_key_id = (select api_key_id from runs where id = ?) and created_at >= date_trunc('day', now() at time zone 'utc') at time zone 'utc'`;
      if (lastFiller) await sql(`update ${cappedKeyRuns.replace('runs where', 'runs set cap_usd = 0 where')}`, [lastFiller]);
      const filler = await t.call('POST', '/runs', { key: BOB.capped, body: { workflow: W_SUMMARY, inputs: { topic: `filler-${r}` } } });
      assert.is(filler.status, 202, JSON.stringify(filler.body));
      const fillerId = (lastFiller = String(filler.body.run.id));
      await sql('update runs set cap_usd = ? where id = ?', [(CAP - room * PRICE).toFixed(6), fillerId]);

      const keyOf = (q: Req) => (q.idem === null ? undefined : `race-${r}-${q.idem}`);
      const { result: answers, messages } = await messagesWhile(() =>
        Promise.all([
          ...requests.map((q) =>
            t.call('POST', '/runs', {
              key: BOB[q.key],
              body: { workflow: W_SUMMARY, inputs: { topic: `round-${r}-${q.variant}` } },
              headers: keyOf(q) ? { 'idempotency-key': keyOf(q)! } : {},
            }),
          ),
          ...(change
            ? [sql('update workflows set compute_limit_usd = case when compute_limit_usd is null then 1 end where id = ?', [W_SUMMARY]).then(() => null)]
            : []),
        ]).then((all) => all.filter((a) => a !== null)),
      );
      for (const a of answers) assert.ok([202, 402, 409].includes(a.status), `unexpected ${a.status}: ${JSON.stringify(a.body)}`);
      // Counted once whatever the outcome (a 402's hit went with its failed acceptance).
      for (const a of answers) assert.ok(a.headers.get('ratelimit-limit'), `no rate headers on a ${a.status}`);
      // Every request is counted before anything else (src/runs/counted-start.ts), the counts in flight together.
      if (process.env.DATABASE_URL && !change) {
        const counts = messages.filter((m) => /\bcount_requests(_b)?\b/.test(m)).length;
        assert.ok(counts >= 1 && counts <= answers.length, `${counts} counts for ${answers.length} requests`);
      }

      // Per idempotency key: every 202 names the same run and came from the same request; a 409 came from the other.
      const created = new Set<string>();
      let replayed = 0;
      const byKey = new Map<string, { ids: Set<string>; variants: Set<number>; conflicts: Set<number> }>();
      answers.forEach((a, i) => {
        const q = requests[i]!;
        if (a.status === 202 && a.headers.get('idempotent-replayed') === 'true') replayed++;
        else if (a.status === 202) created.add(String(a.body.run.id));
        const k = keyOf(q);
        if (k === undefined) {
          assert.is.not(a.status, 409);
          return;
        }
        const e = byKey.get(k) ?? { ids: new Set(), variants: new Set(), conflicts: new Set() };
        byKey.set(k, e);
        if (a.status === 202) {
          e.ids.add(String(a.body.run.id));
          e.variants.add(q.variant);
        }
        if (a.status === 409) {
          assert.is(a.body.error.code, 'idempotency_conflict');
          e.conflicts.add(q.variant);
        }
      });
      for (const [k, e] of byKey) {
        assert.ok(e.ids.size <= 1, `${k}: ${e.ids.size} different runs`);
        assert.ok(e.variants.size <= 1, `${k}: two different requests both accepted`);
        for (const v of e.conflicts) assert.not.ok(e.variants.has(v), `${k}: the accepted request was also refused as a conflict`);
        if (e.ids.size === 1) {
          const [rec] = await sql<{ run_id: string }>('select run_id from idempotency_records where key = ?', [k]);
          assert.is(String(rec!.run_id), [...e.ids][0]);
        }
      }
      // Every 202 is either the one new run of its key (or of a keyless request) or a replay of it.
      assert.is(created.size + replayed, answers.filter((a) => a.status === 202).length);
      const [made] = await sql<{ n: number }>(`select count(*)::int as n from runs where inputs::text like ?`, [`%round-${r}-%`]);
      assert.is(made!.n, created.size);

      // The cap: never more than `room` new runs on the capped key; a refusal means the room was used up.
      const [capped] = await sql<{ n: number; total: string }>(
        `select count(*) filter (where inputs::text like ?)::int as n, sum(cap_usd)::text as total from ${cappedKeyRuns}`,
        [`%round-${r}-%`, fillerId],
      );
      assert.ok(capped!.n <= room, `${capped!.n} runs under a cap with room for ${room}`);
      assert.ok(Number(capped!.total) <= CAP + 1e-9, `reserved ${capped!.total} > cap ${CAP}`);
      if (answers.some((a) => a.status === 402)) assert.is(capped!.n, room, 'a 402 while there was still room');
    }),
    { numRuns: Number(process.env.RACE_RUNS ?? 12), includeErrorInReport: true },
  );
});

t.run();
