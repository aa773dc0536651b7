import { closeChild, loadStep, rate, ratio, startChild } from '../measure.ts';
import { facts, rows } from '../results.ts';
import { DURATION, HEADERS, log } from '../settings.ts';
import { BENCH_ACCOUNT_ID, VERSION_1, WORKFLOW_1 } from '../shared.ts';

// Part 3c of `npm run bench` (bench/run.ts, BENCH_ONLY=list): a filtered page of GET /runs against an
// unfiltered one, over RUNS runs of one account (docs/design/run-metadata.md#filters).

const RUNS = 100_000;
/** A filtered page within this factor of an unfiltered one's time (its rate at least 1 / FACTOR of it). */
const FACTOR = 1.2;

/**
 * RUNS completed runs of the bench account (the harness's statements take `?` parameters), one a second back from now, written with SQL in one
 * statement (cheap to set up), with their metadata pairs: `customer` (100 values, spread evenly),
 * `batch` (100 values, each a block of consecutive runs) and `env` (2 values).
 */
const INSERT_RUNS = `insert into runs (id, account_id, workflow_id, version_id, status, outcome, billing_status, charge_usd, user_access,
    compute_limit_usd, credential_mode, inputs, progress, outputs, created_at, queued_at, started_at, completed_at, updated_at, metadata)
  select gen_random_uuid(), ?, ?, ?, 'completed', 'completed', 'settled', 0.0001, 'owned', 5, 'service_hosted', '{}', '{"results":{},"timers":{}}', '[]',
         t, t, t, t, t,
         jsonb_build_object('customer', 'c' || (i % 100), 'batch', 'b' || (i / 1000), 'env', case when i % 2 = 0 then 'prod' else 'dev' end)
    from generate_series(1, ?::int) i cross join lateral (select now() - i * interval '1 second' as t) c`;
const INSERT_LABELS = `insert into run_labels (account_id, key, value, created_at, run_id)
  select r.account_id, m.key, m.value, r.created_at, r.id from runs r cross join jsonb_each_text(r.metadata) m where r.account_id = ?`;

export async function listRunsFiltered(): Promise<void> {
  log(`GET /runs filters: starting the app (NullEngine), writing ${RUNS.toLocaleString('en')} runs of one account`);
  const child = await startChild('null');
  const runs = `${child.ready.appUrl}/v1/runs`;
  await child.sql(INSERT_RUNS, [BENCH_ACCOUNT_ID, WORKFLOW_1, VERSION_1, RUNS]);
  await child.sql(INSERT_LABELS, [BENCH_ACCOUNT_ID]);
  await child.sql('vacuum analyze runs');
  await child.sql('vacuum analyze run_labels');
  const middle = encodeURIComponent(new Date(Date.now() - (RUNS / 2) * 1000).toISOString());
  const filtered: [string, string][] = [
    ['metadata[customer] (1 % of the runs, spread)', 'metadata[customer]=c7'],
    ['metadata[batch] (1 %, one block in the middle)', 'metadata[batch]=b57'],
    ['two pairs (0.5 %)', 'metadata[customer]=c7&metadata[env]=dev'],
    ['createdBefore (half the runs)', `createdBefore=${middle}`],
    ['metadata[env] + createdBefore', `metadata[env]=prod&createdBefore=${middle}`],
  ];
  // Unfiltered before and after the filtered steps (the machine is shared): their mean is the baseline.
  const page = (query: string) => ({ url: `${runs}?limit=20${query ? `&${query}` : ''}`, connections: 32, seconds: DURATION, headers: HEADERS });
  const first = await loadStep(child, 'GET /runs ×32 (unfiltered)', page(''));
  const results = [];
  for (const [name, query] of filtered) results.push({ name, result: await loadStep(child, `GET /runs ×32, ${name}`, page(query)) });
  const last = await loadStep(child, 'GET /runs ×32 (unfiltered, again)', page(''));
  const baseline = (first.rps + last.rps) / 2;
  facts.listUnfiltered = baseline;
  rows.push({
    group: 'Run list',
    name: `GET /runs, first page of 20, ${RUNS.toLocaleString('en')} runs of the account, unfiltered`,
    clients: '32',
    value: rate(baseline),
    p50: (first.p50 + last.p50) / 2,
    p99: Math.max(first.p99, last.p99),
    baseline: `runs ${rate(first.rps)} before, ${rate(last.rps)} after`,
    ratio: '—',
    target: '(baseline)',
    verdict: '',
  });
  for (const { name, result } of results) {
    facts[`list ${name}`] = result.rps;
    rows.push({
      group: 'Run list',
      name: `the same, filtered by ${name}`,
      clients: '32',
      value: rate(result.rps),
      p50: result.p50,
      p99: result.p99,
      baseline: `unfiltered ${rate(baseline)}`,
      ratio: ratio(result.rps, baseline),
      target: `within ${FACTOR}× (≥ ${ratio(1, FACTOR)})`,
      verdict: result.rps * FACTOR >= baseline ? 'met' : 'MISS',
    });
  }
  await closeChild(child);
}
