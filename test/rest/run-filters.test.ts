import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from '../helpers/app.ts';

/** GET /runs filters (docs/design/run-metadata.md#filters): metadata pairs, createdAfter, createdBefore, page by page. */

const W_SUMMARY = 'aaaaaaaa-0000-4000-8000-000000000001';
const KEY = 'wr_test_bob';
const T0 = Date.parse('2026-03-01T00:00:00Z');

interface Made {
  id: string;
  metadata: Record<string, string>;
  createdAt: number;
}

const t = suite<{ t: TestApp; made: Made[] }>('GET /runs filters');
t.before(async (ctx) => {
  ctx.t = await startTestApp();
  ctx.made = [];
  for (let i = 0; i < 14; i++) {
    const metadata: Record<string, string> = { env: i % 2 ? 'dev' : 'prod', customer: `c${i % 3}` };
    if (i % 4 === 0) metadata.tag = 'x y&z=1';
    const res = await ctx.t.call('POST', '/runs', { key: KEY, body: { workflow: W_SUMMARY, inputs: { topic: `t${i}` }, metadata } });
    assert.is(res.status, 202, res.text);
    // Creation times a minute apart, some equal (ties are ordered by id), set directly to test the range.
    const createdAt = T0 + Math.floor(i / 2) * 60_000;
    await ctx.t.deps.orm.em.fork().execute('update runs set created_at = ? where id = ?', [new Date(createdAt), res.body.run.id]);
    await ctx.t.deps.orm.em.fork().execute('update run_labels set created_at = ? where run_id = ?', [new Date(createdAt), res.body.run.id]);
    ctx.made.push({ id: res.body.run.id, metadata, createdAt });
  }
});
t.after(async (ctx) => ctx.t.close());

/** Every page of GET /runs with `query`, `limit` rows at a time: the ids in order. */
async function allPages(t: TestApp, query: string, limit = 3): Promise<string[]> {
  const ids: string[] = [];
  for (let offset = 0; ; offset += limit) {
    const res = await t.call('GET', `/runs?${query}${query ? '&' : ''}limit=${limit}&offset=${offset}`, { key: KEY });
    assert.is(res.status, 200, res.text);
    ids.push(...res.body.runs.map((r: { id: string }) => r.id));
    if (!res.body.pagination.hasMore) return ids;
    assert.is(res.body.runs.length, limit);
  }
}

/** The made runs that pass `keep`, newest first, then by id descending (the list's order). */
const expected = (made: Made[], keep: (m: Made) => boolean) =>
  made
    .filter(keep)
    .sort((a, b) => b.createdAt - a.createdAt || (a.id < b.id ? 1 : -1))
    .map((m) => m.id);

t('metadata pairs return exactly the runs holding every pair, page by page, in the list order', async ({ t, made }) => {
  const has = (pairs: Record<string, string>) => (m: Made) => Object.entries(pairs).every(([k, v]) => m.metadata[k] === v);
  assert.equal(
    await allPages(t, ''),
    expected(made, () => true),
  );
  assert.equal(await allPages(t, 'metadata[env]=prod'), expected(made, has({ env: 'prod' })));
  assert.equal(await allPages(t, 'metadata[env]=prod&metadata[customer]=c1', 2), expected(made, has({ env: 'prod', customer: 'c1' })));
  assert.equal(await allPages(t, `metadata[tag]=${encodeURIComponent('x y&z=1')}`, 1), expected(made, has({ tag: 'x y&z=1' })));
  assert.equal(await allPages(t, 'metadata[env]=staging'), []);
  assert.equal(await allPages(t, 'metadata[ENV]=prod'), [], 'keys are case-sensitive');
  // Another account's runs never match.
  const other = await t.call('GET', '/runs?metadata[env]=prod', { key: 'wr_test_carol' });
  assert.equal(other.body.runs, []);
  // The rows show their metadata.
  const row = (await t.call('GET', '/runs?metadata[env]=dev&limit=1', { key: KEY })).body.runs[0];
  assert.equal(row.metadata, made.find((m) => m.id === row.id)!.metadata);
});

t('createdAfter (inclusive) and createdBefore (exclusive) bound the creation time, alone, together and with metadata', async ({ t, made }) => {
  const at = (minutes: number) => new Date(T0 + minutes * 60_000).toISOString();
  const within = (from: number | null, to: number | null) => (m: Made) =>
    (from === null || m.createdAt >= T0 + from * 60_000) && (to === null || m.createdAt < T0 + to * 60_000);
  assert.equal(await allPages(t, `createdAfter=${at(3)}`), expected(made, within(3, null)));
  assert.equal(await allPages(t, `createdBefore=${at(3)}`), expected(made, within(null, 3)));
  assert.equal(await allPages(t, `createdAfter=${at(2)}&createdBefore=${at(5)}`, 2), expected(made, within(2, 5)));
  assert.equal(
    await allPages(t, `createdAfter=${at(1)}&createdBefore=${at(6)}&metadata[customer]=c0`, 1),
    expected(made, (m) => within(1, 6)(m) && m.metadata.customer === 'c0'),
  );
  // An offset form of the same instant, and lower-case separators (RFC 3339 allows both).
  assert.equal(await allPages(t, `createdAfter=${encodeURIComponent('2026-03-01T01:03:00+01:00')}`), expected(made, within(3, null)));
  assert.equal(await allPages(t, 'createdBefore=2026-03-01t00:03:00z'), expected(made, within(null, 3)));
  assert.equal(await allPages(t, `createdAfter=${at(5)}&createdBefore=${at(2)}`), []);
  // Offsets RFC 3339 allows and Postgres does not read (beyond ±15:59), and instants beyond Postgres's
  // years, mean what they say: 2026-03-01T00:03Z written with a -21:05 offset; every run is after year 1.
  assert.equal(await allPages(t, `createdAfter=${encodeURIComponent('2026-02-28T02:58:00-21:05')}`), expected(made, within(3, null)));
  assert.equal(await allPages(t, `createdAfter=${encodeURIComponent('0001-01-01T00:00:00+23:59')}`), expected(made, within(null, null)));
  assert.equal(await allPages(t, `createdBefore=${encodeURIComponent('0001-01-01T00:00:00+23:59')}`), []);
  assert.equal(await allPages(t, `createdBefore=${encodeURIComponent('9999-12-31T23:59:59-23:59')}`), expected(made, within(null, null)));
  // Microseconds are kept: a bound a fraction of a millisecond after a run's creation still includes it.
  const first = made.reduce((a, b) => (a.createdAt <= b.createdAt ? a : b));
  const justAfter = `${new Date(first.createdAt).toISOString().slice(0, 23)}9Z`;
  assert.ok((await allPages(t, `createdBefore=${justAfter}`)).includes(first.id));
  // With status: every run here is pending.
  assert.equal(await allPages(t, `status=pending&createdAfter=${at(6)}`), expected(made, within(6, null)));
  assert.equal(await allPages(t, `status=completed&metadata[env]=prod`), []);
});

t('bad filters are 400 invalid_request with a message naming what is wrong', async ({ t }) => {
  const cases: [string, RegExp][] = [
    ['createdAfter=yesterday', /createdAfter must be a date-time/],
    ['createdBefore=2026-13-01T00:00:00Z', /createdBefore must be a date-time/],
    ['createdAfter=2026-03-01', /createdAfter must be a date-time/],
    ['createdAfter=2026-03-01T00:00:00Z&createdAfter=2026-03-02T00:00:00Z', /"createdAfter" is given more than once/],
    [`metadata[${'k'.repeat(65)}]=v`, new RegExp(`metadata\\[${'k'.repeat(65)}\\]`)],
    [`metadata[note]=${'v'.repeat(513)}`, /metadata\[note\] must NOT have more than 512 characters/],
    ['metadata[env]=a&metadata[env]=b', /"metadata\[env\]" is given more than once/],
    ['metadata=prod', /metadata must be given as name\[KEY\]=VALUE pairs/],
    ['metadata[env]=%00', /metadata\[env\] must not contain NUL characters/],
    [Array.from({ length: 17 }, (_, i) => `metadata[k${i}]=v`).join('&'), /metadata must NOT have more than 16 properties/],
    ['metadata[]=v', /metadata\[\]/],
    ['meta[env]=prod', /unknown query parameter "meta"/],
  ];
  for (const [query, message] of cases) {
    const res = await t.call('GET', `/runs?${query}`, { key: KEY });
    assert.is(res.status, 400, `${query.slice(0, 60)}: ${res.text}`);
    assert.is(res.body.error.code, 'invalid_request');
    assert.match(res.body.error.message, message, query.slice(0, 60));
  }
});

t.run();
