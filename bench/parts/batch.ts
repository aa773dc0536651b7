import { closeChild, countKinds, loadStep, rate, ratio, startChild } from '../measure.ts';
import { httpJson } from '../load.ts';
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
