import { closeChild, startChild } from '../measure.ts';
import { facts, rows } from '../results.ts';
import { HEADERS, log } from '../settings.ts';
import { BENCH_ACCOUNT_ID, VERSION_1, WORKFLOW_1 } from '../shared.ts';

// Part 3d of `npm run bench` (bench/run.ts, BENCH_ONLY=bulk): POST /runs/cancel of RUNS queued runs
// matched by one metadata filter, page after page with its cursor (docs/design/runs-in-sets.md).

const RUNS = 10_000;
/** The whole cancel, every page, within this many seconds. */
const TARGET_S = 5;

/** RUNS queued runs of the bench account (the harness's statements take `?` parameters), one a millisecond back from now, with `batch` in their metadata. */
const INSERT_QUEUED = `insert into runs (id, account_id, workflow_id, version_id, status, phase, billing_status, user_access,
    compute_limit_usd, credential_mode, inputs, progress, outputs, created_at, queued_at, updated_at, metadata)
  select gen_random_uuid(), ?, ?, ?, 'pending', 'queued', 'pending', 'owned', 5, 'service_hosted', '{}', '{"results":{},"timers":{}}', '[]',
         t, t, t, jsonb_build_object('batch', 'bulk', 'env', case when i % 2 = 0 then 'prod' else 'dev' end)
    from generate_series(1, ?::int) i cross join lateral (select now() - i * interval '1 millisecond' as t) c`;
const INSERT_LABELS = `insert into run_labels (account_id, key, value, created_at, run_id)
  select r.account_id, m.key, m.value, r.created_at, r.id from runs r cross join jsonb_each_text(r.metadata) m where r.account_id = ?`;

export async function bulkCancel(): Promise<void> {
  log(`POST /runs/cancel: starting the app (NullEngine), writing ${RUNS.toLocaleString('en')} queued runs of one account`);
  const child = await startChild('null');
  await child.sql(INSERT_QUEUED, [BENCH_ACCOUNT_ID, WORKFLOW_1, VERSION_1, RUNS]);
  await child.sql(INSERT_LABELS, [BENCH_ACCOUNT_ID]);
  await child.sql('vacuum analyze runs');
  await child.sql('vacuum analyze run_labels');
  const filter = { metadata: { batch: 'bulk' }, status: ['pending'] };
  const started = performance.now();
  let cursor: string | null = null;
  let calls = 0;
  let cancelled = 0;
  do {
    const res = await fetch(`${child.ready.appUrl}/v1/runs/cancel`, {
      method: 'POST',
      headers: HEADERS,
      body: JSON.stringify({ filter, ...(cursor ? { cursor } : {}) }),
    });
    if (res.status !== 200) throw new Error(`POST /runs/cancel answered ${res.status}: ${await res.text()}`);
    const body = (await res.json()) as { cancelled: number; nextCursor: string | null };
    calls++;
    cancelled += body.cancelled;
    cursor = body.nextCursor;
  } while (cursor);
  const seconds = (performance.now() - started) / 1000;
  const [left] = await child.sql<{ live: number; charged: number; ledger: number }>(
    `select count(*) filter (where status <> 'cancelled')::int as live, count(*) filter (where billing_status <> 'not_charged')::int as charged,
            (select count(*) from ledger_entries l where l.account_id = ? and l.run_id is not null)::int as ledger
       from runs where account_id = ?`,
    [BENCH_ACCOUNT_ID, BENCH_ACCOUNT_ID],
  );
  facts.bulkCancelSeconds = seconds;
  const sound = cancelled === RUNS && left!.live === 0 && left!.charged === 0 && left!.ledger === 0;
  rows.push({
    group: 'Runs in sets',
    name: `POST /runs/cancel by one metadata filter, ${RUNS.toLocaleString('en')} queued runs, ${calls} calls (cursor)`,
    clients: '1',
    value: `${seconds.toFixed(2)} s`,
    p50: 0,
    p99: 0,
    baseline: `${cancelled} cancelled, ${left!.live} left, ${left!.charged} charged, ${left!.ledger} ledger rows`,
    ratio: '—',
    target: `≤ ${TARGET_S} s, nothing charged`,
    verdict: seconds <= TARGET_S && sound ? 'met' : 'MISS',
  });
  await closeChild(child);
}
