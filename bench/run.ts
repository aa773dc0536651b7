import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { describeMachine } from './machine.ts';
import { tempDirs } from './measure.ts';
import { acceptance } from './parts/acceptance.ts';
import { flowControl } from './parts/flow-control.ts';
import { batches } from './parts/batch.ts';
import { endToEnd } from './parts/end-to-end.ts';
import { hotPath } from './parts/hot-path.ts';
import { instrumentationCost } from './parts/instrumentation.ts';
import { listRunsFiltered } from './parts/list-runs.ts';
import { bulkCancel } from './parts/bulk-cancel.ts';
import { executingStreams } from './parts/executing-streams.ts';
import { streams } from './parts/streams.ts';
import { onTemporal } from './parts/temporal-part.ts';
import { productionProcess } from './parts/process.ts';
import { bottleneck, kindsText, profilesText, stepTable, table } from './report.ts';
import { aborted, facts, kinds, notes, profiles, rows, steps } from './results.ts';
import { CAPACITY, DATABASE_URL, DB_LOCAL, DURATION, env, HOT, log, ONLY, STREAMS, TEMPORAL, USERS, WARMUP } from './settings.ts';

/**
 * `npm run bench`: every figure next to a baseline measured in the same run, on the machine it ran on.
 *
 *   0. The hot path: POST /runs with a unique Idempotency-Key at 1 and 32 clients on the embedded engine
 *      (the runs execute; the rate counts until the last accepted run completed) vs a one-statement floor
 *      (bench/floor.ts POST /cte/runs, pool of 4), and the same without a key.
 *   1. POST /runs at 1, 32 and 128 clients (NullEngine: runs stay queued) vs the floor, a bare node:http
 *      route doing the same inserts in one transaction (bench/floor.ts); once more with Idempotency-Key.
 *   1d. Batches (`batch`): runs accepted per second through 1,000-run POST /runs/batch at one client vs
 *      keyed POST /runs at 32, and keyed POST /runs at one client vs the floor's; with `e2e` too, 10,000
 *      runs started by ten batches, first POST to last terminal, beside the end-to-end closed loop.
 *   1b. What the instrumentation costs: POST /runs ×32 with the metrics on (and /metrics scraped every
 *      5 s) vs off, alternating in one server process, BENCH_METRICS_ROUNDS (3) pairs.
 *   2. End-to-end on the embedded engine: 3-step template runs from 202 to terminal, closed loop of
 *      RUN_CAPACITY clients, with one account and spread over BENCH_ACCOUNTS; per-step overhead from
 *      sequential single runs.
 *   3. GET /runs/{id} at 32 clients (a completed run; a queued run behind a deep queue) vs the floor's select.
 *   3c. GET /runs filtered (metadata pairs, a creation-time range) vs unfiltered, 100,000 runs of one account.
 *   3d. POST /runs/cancel of 10,000 queued runs by one metadata filter, page after page (`bulk`).
 *   4. Live delivery while BENCH_LIVE_RUNS (2000) runs execute on the embedded engine, a stream each
 *      (`live` alone); then N concurrent SSE streams: server memory per stream, live-event delivery
 *      latency to 1000 followers of one run, vs bare node:http SSE responses.
 *   5. Temporal (bench/temporal.ts): 3-step runs end to end on ENGINE=temporal vs a bare one-activity
 *      workflow on the same Temporal server, closed loops of the same concurrency.
 *   6. The production process (bench/parts/process.ts): the compiled service started with node, time to
 *      /readyz on a fresh and a migrated database, idle RSS, heap used and commits per 10 s, on the
 *      embedded engine and (with a Temporal CLI or server) ENGINE=temporal with its in-process worker.
 * Then where the time goes: CPU of the server, Postgres and the load generator per step, event-loop
 * delay, SQL statements per operation, and a CPU profile of the server under load.
 *
 * Environment: DATABASE_URL (else embedded PGlite), BENCH_DURATION (s per load step, 5), BENCH_WARMUP
 * (s, 1), BENCH_STREAMS (10000), BENCH_HOT_STREAMS (1000), BENCH_LIVE_RUNS (2000), RUN_CAPACITY (64),
 * BENCH_USERS (closed-loop clients, RUN_CAPACITY), BENCH_ACCOUNTS (16), BENCH_ONLY
 * (hotpath,accept,batch,metrics,e2e,poll,list,bulk,streams,process, and temporal when a Temporal CLI is found or
 * TEMPORAL_ADDRESS is set; `live`: the streams part's first step alone), BENCH_PROFILE (1), BENCH_COMPILED (a compiled
 * tree for the process part; else it compiles one), BENCH_JSON (file for all
 * figures as JSON), TEMPORAL_ADDRESS / TEMPORAL_NAMESPACE (the temporal part's server; else its own dev server).
 * With DATABASE_URL the bench drops and recreates the database's `public` schema: use a bench database.
 *
 * Here: main, the order of the parts and the printing. Each part is a file in bench/parts/; settings.ts,
 * results.ts, measure.ts (the measuring they share) and report.ts hold the rest.
 */

async function main(): Promise<void> {
  const t0 = performance.now();
  const machine = describeMachine();
  let dbKind = 'embedded PGlite (single connection, in the server process)';
  if (DATABASE_URL) {
    const c = new pg.Client({ connectionString: DATABASE_URL });
    await c.connect();
    const { rows: v } = await c.query<{ v: string }>(`select current_setting('server_version') as v`);
    const { rows: s } = await c.query<{ sc: string; sb: string }>(
      `select current_setting('synchronous_commit') as sc, current_setting('shared_buffers') as sb`,
    );
    await c.end();
    dbKind = `PostgreSQL ${v[0]!.v} server${DB_LOCAL ? ' on this machine' : ''} (synchronous_commit=${s[0]!.sc}, shared_buffers=${s[0]!.sb}), service pool max 10`;
  } else {
    console.error('WARNING: no DATABASE_URL: the bench runs on embedded PGlite, which is a single connection in the server process;');
    console.error('         its figures are not comparable with a Postgres server. Set DATABASE_URL=postgres://…/wr_bench for the real ones.');
  }
  log(`${machine.cpu}, ${machine.cores} cores, ${machine.memoryGiB} GiB, node ${machine.node}; ${dbKind}`);

  try {
    if (ONLY.has('hotpath')) await hotPath();
    // A queued run's poll needs the queue the acceptance steps build: with `poll` alone only a completed run is polled.
    if (ONLY.has('accept')) await acceptance();
    if (ONLY.has('batch')) await batches();
    if (ONLY.has('flow')) await flowControl();
    if (ONLY.has('metrics')) await instrumentationCost();
    if (ONLY.has('e2e') || ONLY.has('poll')) await endToEnd();
    if (ONLY.has('list')) await listRunsFiltered();
    if (ONLY.has('bulk')) await bulkCancel();
    if (ONLY.has('streams')) await streams();
    else if (ONLY.has('live')) await executingStreams();
    // Without a Temporal CLI or server the default set says so (onTemporal prints the reason).
    if (ONLY.has('process')) await productionProcess();
    if (ONLY.has('temporal') || (env.BENCH_ONLY === undefined && 'skip' in TEMPORAL)) await onTemporal();
  } finally {
    for (const d of tempDirs) rmSync(d, { recursive: true, force: true });
  }

  const shared = steps.filter((s) => s.cpu.other > 30);
  if (shared.length) {
    notes.push(
      `Other processes used more than 30 % of a core during ${shared.length} of ${steps.length} steps (${shared.map((s) => `${s.name} ${s.cpu.other.toFixed(0)} %`).join(', ')}): ` +
        `those figures are pessimistic; the machine was shared.`,
    );
  }
  if (aborted.requests) {
    notes.push(
      `${aborted.requests} requests that the load generator cut off when a step ended were logged by the service at level error ("startRun failed", ECONNRESET "aborted"); the bench counts them instead of printing them.`,
    );
  }
  const header = [
    `Workflow Run API benchmark, ${machine.date}`,
    `machine: ${machine.cpu}, ${machine.cores} cores, ${machine.memoryGiB} GiB RAM, ${machine.os}, node ${machine.node}, load average at start ${machine.loadAvg}`,
    `database: ${dbKind}`,
    `settings: BENCH_DURATION=${DURATION}s per load step (after ${WARMUP}s warm-up), RUN_CAPACITY=${CAPACITY}, closed-loop clients ${USERS}, streams ${STREAMS} (${HOT} on the hot run); server, load generator and database share the machine`,
  ];
  const text = [
    header.join('\n'),
    '',
    table(),
    '',
    'Notes:',
    ...notes.map((n) => `- ${n}`),
    '',
    'Where the time goes, per measured step:',
    '',
    stepTable(),
    '',
    'SQL statements per operation (counted through the ORM logger, one operation at a time):',
    kindsText(),
    '',
    'CPU profiles of the server (self time, idle excluded):',
    profilesText(),
    '',
    'Bottleneck:',
    bottleneck(),
    '',
    `(bench took ${((performance.now() - t0) / 1000).toFixed(0)} s)`,
  ].join('\n');
  console.log(text);
  const json = env.BENCH_JSON ?? join(mkdtempSync(join(tmpdir(), 'wr-bench-')), 'results.json');
  writeFileSync(json, JSON.stringify({ machine, dbKind, rows, steps, kinds, profiles, notes, facts }, null, 2));
  console.error(`· results also in ${json}`);
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
