import { inFlightRun } from '../../src/db/entities/run-predicates.ts';
import type { ServerChild } from '../child.ts';
import { hammer, type LoadResult } from '../load.ts';
import { closeChild, measured, profiled, rate, startChild } from '../measure.ts';
import { facts, notes, rows, type StepReport } from '../results.ts';
import { DURATION, HEADERS, log, runBody, sleep, WARMUP } from '../settings.ts';
import { WORKFLOW_3 } from '../shared.ts';

// Part 0 of `npm run bench` (bench/run.ts): the hot path, POST /runs with an Idempotency-Key, runs executing, vs the one-statement floor.

/**
 * Until no run of the service is pending, running or suspended (the floor's runs have phase `floor`).
 * Counted with the predicates of runs_in_flight_idx and runs_queue_fair_idx, so polling during a drain
 * reads those runs only, not the floor's pending rows.
 */
async function drained(child: ServerChild, limitMs = 60_000): Promise<number> {
  const t0 = performance.now();
  for (;;) {
    const [r] = await child.sql<{ n: number }>(
      `select ((select count(*) from runs where ${inFlightRun()})
             + (select count(*) from runs where status = 'pending' and phase = 'queued'))::int as n`,
    );
    if (!r!.n) return performance.now() - t0;
    if (performance.now() - t0 > limitMs) throw new Error(`${r!.n} runs still not terminal after ${limitMs} ms`);
    await sleep(20);
  }
}

interface HotStep extends LoadResult {
  step: StepReport;
  /** Accepted runs per second over the load and the time to complete every accepted run. */
  executed: number;
  drainMs: number;
}

/**
 * A load step on the embedded engine: warm-up (unless `warm`: the previous step ran the same load),
 * drain, then the measured load and the drain of what it accepted.
 */
async function hotStep(child: ServerChild, name: string, opts: Parameters<typeof hammer>[0], drain: boolean, warm = false): Promise<HotStep> {
  if (WARMUP > 0 && !warm) await hammer({ ...opts, seconds: WARMUP });
  await drained(child);
  // Statistics as autovacuum keeps them on a live database: these tables were filled seconds ago.
  await child.sql('analyze');
  let drainMs = 0;
  const r = await measured(child, name, async () => {
    const res = await hammer(opts);
    if (drain) drainMs = await drained(child);
    return { ...res, ops: res.ok };
  });
  if (r.failed) notes.push(`${name}: ${r.failed} failed responses (${JSON.stringify(r.statuses)})`);
  const executed = r.ok / (opts.seconds + drainMs / 1000);
  log(
    `${name}: ${r.rps.toFixed(0)} req/s${drain ? ` (${executed.toFixed(0)} accepted and completed /s)` : ''}, p50 ${r.p50.toFixed(2)} ms, p99 ${r.p99.toFixed(2)} ms`,
  );
  return { ...r, executed, drainMs };
}

/** Rounds of floor and service steps, alternating. */
const ROUNDS = 3;

interface Pair {
  floor: HotStep;
  service: HotStep;
}

/**
 * The floor's step and the service's, ROUNDS times in alternation: a ratio is taken within each pair and
 * the median pair is reported, so a machine whose speed drifts during the run (a shared host) moves
 * both sides of a ratio alike instead of favouring whichever side ran in its faster minute.
 */
async function pairs(child: ServerChild, name: string, floorUrl: string, appUrl: string, opts: Omit<Parameters<typeof hammer>[0], 'url'>): Promise<Pair[]> {
  const out: Pair[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const round = ` (round ${i + 1})`;
    const floor = await hotStep(child, `cte floor ${name}${round}`, { ...opts, url: floorUrl }, false, i > 0);
    const service = await hotStep(child, `POST /runs ${name}, runs executing${round}`, { ...opts, url: appUrl }, true, i > 0);
    out.push({ floor, service });
  }
  return out;
}

/** The pair whose `ratio` is the median of the pairs'. */
function medianPair(ps: Pair[], ratio: (p: Pair) => number): Pair {
  return [...ps].sort((a, b) => ratio(a) - ratio(b))[Math.floor(ps.length / 2)]!;
}

/** Server and Postgres CPU (ms) and the service's SQL statements per operation of a step. */
function perRequest(s: StepReport): { server: number; postgres: number; statements: number } {
  const ops = Math.max(1, s.ops);
  return {
    server: s.server.cpuMs / ops,
    postgres: Number.isNaN(s.cpu.postgres) ? NaN : ((s.cpu.postgres / 100) * s.server.wallMs) / ops,
    statements: s.server.sql.statements / ops,
  };
}

export async function hotPath(): Promise<void> {
  log('hot path: starting the app (embedded engine) and the one-statement floor');
  const child = await startChild('embedded');
  const app = `${child.ready.appUrl}/v1/runs`;
  const cte = `${child.ready.floorUrl}/cte/runs`;
  const keyed = JSON.stringify({ workflow: WORKFLOW_3, inputs: { name: 'Ada' }, idempotencyKey: 'hot-[<id>]' });
  const base = { method: 'POST' as const, seconds: DURATION, headers: HEADERS };
  const x1 = await pairs(child, '+ key ×1', cte, app, { ...base, connections: 1, body: keyed, idReplacement: true });
  const x32 = await pairs(child, '+ key ×32', cte, app, { ...base, connections: 32, body: keyed, idReplacement: true });
  const n32 = await hotStep(child, 'POST /runs no key ×32, runs executing', { ...base, url: app, connections: 32, body: runBody(WORKFLOW_3) }, true);
  const { floor: f1, service: s1 } = medianPair(x1, (p) => p.service.p50 / p.floor.p50);
  const { floor: f32, service: s32 } = medianPair(x32, (p) => p.service.executed / p.floor.rps);
  const p99At32 = medianPair(x32, (p) => p.service.p99 / p.floor.p99);
  const range = (ps: Pair[], ratio: (p: Pair) => number, digits: number) => {
    const rs = ps.map(ratio).sort((a, b) => a - b);
    return `${rs[0]!.toFixed(digits)}–${rs[rs.length - 1]!.toFixed(digits)}`;
  };
  const cpu = (s: HotStep) => {
    const p = perRequest(s.step);
    return `${p.server.toFixed(2)} / ${Number.isNaN(p.postgres) ? 'n/a' : p.postgres.toFixed(2)} ms CPU (service / Postgres), ${p.statements.toFixed(1)} statements`;
  };
  const throughput = s32.executed / f32.rps;
  const p50x = s1.p50 / f1.p50;
  const p99x = p99At32.service.p99 / p99At32.floor.p99;
  for (const [name, s, f, c] of [
    ['POST /runs with a unique Idempotency-Key, accepted and executed', s32, f32, 32],
    ['POST /runs without Idempotency-Key, accepted and executed', n32, f32, 32],
    ['POST /runs with a unique Idempotency-Key, accepted and executed', s1, f1, 1],
  ] as const) {
    const isHead = s === s32;
    rows.push({
      group: 'Hot path',
      name,
      clients: String(c),
      value: `${rate(s.executed)} (accepted ${rate(s.rps)})`,
      p50: s.p50,
      // The head row's p99 is the median pair's by p99 (its throughput the median pair's by throughput).
      p99: isHead ? p99At32.service.p99 : s.p99,
      baseline: `one-statement floor ${rate(f.rps)}`,
      baseP50: f.p50,
      baseP99: isHead ? p99At32.floor.p99 : f.p99,
      ratio: (s.executed / f.rps).toFixed(3),
      target: isHead ? '≥ 0.40 of floor, p99 ≤ 2 × floor' : s === s1 ? 'p50 ≤ 2.5 × floor' : '(informative)',
      verdict: isHead ? (throughput >= 0.4 && p99x <= 2 ? 'met' : 'MISS') : s === s1 ? (p50x <= 2.5 ? 'met' : 'MISS') : '',
    });
  }
  facts.hotThroughputRatio = throughput;
  facts.hotP50Ratio = p50x;
  facts.hotP99Ratio = p99x;
  const headline =
    `Hot path ratios (same run; the median of ${ROUNDS} alternating floor/service pairs, the pairs' range in brackets): ` +
    `throughput (accepted and executed with a key ×32 / one-statement floor ×32) ${throughput.toFixed(3)} [${range(x32, (p) => p.service.executed / p.floor.rps, 3)}] (target ≥ 0.40); ` +
    `1-connection p50 ${s1.p50.toFixed(2)} / ${f1.p50.toFixed(2)} ms = ${p50x.toFixed(2)}× [${range(x1, (p) => p.service.p50 / p.floor.p50, 2)}] (target ≤ 2.5×); ` +
    `32-connection p99 ${p99At32.service.p99.toFixed(1)} / ${p99At32.floor.p99.toFixed(1)} ms = ${p99x.toFixed(2)}× [${range(x32, (p) => p.service.p99 / p.floor.p99, 2)}] (target ≤ 2×). ` +
    `Per request — with key ×32: ${cpu(s32)}; without key ×32: ${cpu(n32)}; with key ×1: ${cpu(s1)}; floor ×32: ${cpu(f32).replace(/, [\d.]+ statements$/, ', 1 statement')}. ` +
    `The service's figures include executing the 3-step run (drain after the load: ${(s32.drainMs / 1000).toFixed(1)} s with key, ${(n32.drainMs / 1000).toFixed(1)} s without).`;
  notes.push(headline);
  log(headline);
  await profiled(child, 'POST /runs + key ×1, runs executing', async () => {
    await hammer({ ...base, seconds: Math.min(3, DURATION), url: app, connections: 1, body: keyed, idReplacement: true });
    await drained(child);
  });
  await drained(child);
  await closeChild(child);
}
