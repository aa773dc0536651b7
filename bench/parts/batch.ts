import type { ServerChild } from '../child.ts';
import { closeChild, countKinds, loadStep, measured, rate, ratio, startChild } from '../measure.ts';
import { httpJson, type Waiter } from '../load.ts';
import { facts, rows } from '../results.ts';
import { DURATION, HEADERS, log } from '../settings.ts';
import { BENCH_KEY, WORKFLOW_3 } from '../shared.ts';

// Part 1d of `npm run bench` (bench/run.ts): runs started through 1,000-run batches vs single keyed POST /runs.

const BATCH = 1000;
/** Batches in flight at once: one, so that p99 is what one batch waits for. */
const BATCH_CLIENTS = 1;

export async function batches(): Promise<void> {
  log('batch: starting the app (NullEngine) and the floor');
  const child = await startChild('null');
  const app = `${child.ready.appUrl}/v1/runs`;
  const floor = `${child.ready.floorUrl}/runs`;
  const keyed = (c: number) =>
    loadStep(child, `POST /runs ×${c} + Idempotency-Key (batch part)`, {
      url: app,
      method: 'POST',
      connections: c,
      seconds: DURATION,
      headers: HEADERS,
      body: JSON.stringify({ workflow: WORKFLOW_3, inputs: { name: 'Ada' }, idempotencyKey: 'single-[<id>]' }),
      idReplacement: true,
    });
  const single32 = await keyed(32);
  const single1 = await keyed(1);
  const floor1 = await loadStep(child, 'floor POST ×1 (batch part)', {
    url: floor,
    method: 'POST',
    connections: 1,
    seconds: DURATION,
    headers: HEADERS,
    body: JSON.stringify({ workflow: WORKFLOW_3, inputs: { name: 'Ada' } }),
  });
  const items = Array.from({ length: BATCH }, (_, i) => ({ workflow: WORKFLOW_3, inputs: { name: `Ada ${i}` } }));
  const batch = await loadStep(child, `POST /runs/batch of ${BATCH} ×${BATCH_CLIENTS}`, {
    url: `${app}/batch`,
    method: 'POST',
    connections: BATCH_CLIENTS,
    seconds: DURATION,
    headers: HEADERS,
    body: JSON.stringify({ runs: items }),
  });
  const batchRuns = batch.rps * BATCH;
  rows.push({
    group: 'Batches',
    name: `runs through POST /runs/batch of ${BATCH}`,
    clients: String(BATCH_CLIENTS),
    value: rate(batchRuns, 'runs/s'),
    p50: batch.p50,
    p99: batch.p99,
    baseline: `keyed POST /runs ×32 ${rate(single32.rps, 'runs/s')}`,
    ratio: ratio(batchRuns, single32.rps),
    target: '≥ 300 %, p99 ≤ 1000 ms',
    verdict: batchRuns >= 3 * single32.rps && batch.p99 <= 1000 ? 'met' : 'MISS',
  });
  rows.push({
    group: 'Batches',
    name: 'keyed POST /runs, one client',
    clients: '1',
    value: rate(single1.rps),
    p50: single1.p50,
    p99: single1.p99,
    baseline: `floor ${rate(floor1.rps)}`,
    ratio: ratio(single1.rps, floor1.rps),
    target: '≥ 40 % of floor',
    verdict: single1.rps >= 0.4 * floor1.rps ? 'met' : 'MISS',
  });
  facts.batchRunsPerSec = batchRuns;
  facts.batchP99 = batch.p99;
  facts.keyedSingle32 = single32.rps;
  facts.keyedSingle1 = single1.rps;
  facts.floorSingle1 = floor1.rps;
  await countKinds(child, `POST /runs/batch of ${BATCH}`, 3, () => httpJson('POST', `${app}/batch`, { key: BENCH_KEY, body: { runs: items } }));
  await closeChild(child);
}

/** Batches of the end-to-end step (bench/parts/end-to-end.ts): 10,000 runs started by ten batches. */
const E2E_BATCHES = 10;

/**
 * 10,000 3-step runs started by ten 1,000-run batches, one after another, on the end-to-end step's
 * embedded engine (its child and terminal waiter, the same run): from the first batch sent to the last
 * run terminal, as runs/s beside the closed loop's `e2eRunsPerSec`.
 */
export async function batchesEndToEnd(child: ServerChild, app: string, waiter: Waiter, e2eRunsPerSec: number): Promise<void> {
  log(`end-to-end: ${E2E_BATCHES * BATCH} runs started by ${E2E_BATCHES} batches`);
  const out = await measured(child, `${E2E_BATCHES} batches of ${BATCH}, end to end`, async () => {
    const started = performance.now();
    const finished: Promise<string>[] = [];
    for (let b = 0; b < E2E_BATCHES; b++) {
      const runs = Array.from({ length: BATCH }, (_, i) => ({ workflow: WORKFLOW_3, inputs: { name: `Ada ${b}-${i}` } }));
      const res = await httpJson('POST', `${app}/batch`, { key: BENCH_KEY, body: { runs } });
      if (res.status !== 202 || res.body.accepted !== BATCH)
        throw new Error(`POST /runs/batch answered ${res.status}: ${JSON.stringify(res.body).slice(0, 300)}`);
      for (const item of res.body.items) finished.push(waiter.wait(String(item.run.id), 300_000));
    }
    const statuses = await Promise.all(finished);
    return { ops: statuses.length, statuses, seconds: (performance.now() - started) / 1000 };
  });
  const runsPerSec = out.ops / out.seconds;
  const notCompleted = out.statuses.filter((s) => s !== 'completed').length;
  facts.e2eBatches = runsPerSec;
  log(`end-to-end through batches: ${runsPerSec.toFixed(0)} runs/s (${notCompleted} not completed)`);
  rows.push({
    group: 'End to end',
    name: `${E2E_BATCHES * BATCH} 3-step runs started by ${E2E_BATCHES} batches of ${BATCH}, first POST → last terminal`,
    clients: '1',
    value: rate(runsPerSec, 'runs/s'),
    baseline: `closed loop ${rate(e2eRunsPerSec, 'runs/s')}`,
    ratio: ratio(runsPerSec, e2eRunsPerSec),
    target: '≥ 100 % of the closed loop',
    verdict: notCompleted === 0 && runsPerSec >= e2eRunsPerSec ? 'met' : 'MISS',
  });
}
