import type { LoadResult } from '../load.ts';
import { closeChild, loadStep, rate, ratio, startChild } from '../measure.ts';
import { facts, notes, rows, type StepReport } from '../results.ts';
import { DURATION, HEADERS, log, num, runBody } from '../settings.ts';
import { WORKFLOW_3 } from '../shared.ts';

// Part 1b of `npm run bench` (bench/run.ts): what the instrumentation costs POST /runs.

/**
 * One server process, instrumentation switched on and off between rounds (the order alternates so a
 * drifting machine favours neither). While on, /metrics is scraped every 5 s — more often than a
 * Prometheus usually does — so its collection is part of the cost.
 */
export async function instrumentationCost(): Promise<void> {
  log('instrumentation cost: POST /runs ×32 with metrics on and off');
  const rounds = Math.round(num('BENCH_METRICS_ROUNDS', 3));
  const child = await startChild('null');
  const app = `${child.ready.appUrl}/v1/runs`;
  type Measured = LoadResult & { step: StepReport };
  const on: Measured[] = [];
  const off: Measured[] = [];
  for (let i = 0; i < rounds; i++) {
    for (const enabled of i % 2 === 0 ? [true, false] : [false, true]) {
      await child.call({ cmd: 'metrics', on: enabled });
      const scraper = enabled
        ? setInterval(
            () =>
              void fetch(`${child.ready.appUrl}/metrics`)
                .then((r) => r.text())
                .catch(() => undefined),
            5000,
          )
        : null;
      const r = await loadStep(child, `POST /runs ×32, metrics ${enabled ? 'on' : 'off'} (round ${i + 1})`, {
        url: app,
        method: 'POST',
        connections: 32,
        seconds: DURATION,
        headers: HEADERS,
        body: runBody(WORKFLOW_3),
      });
      if (scraper) clearInterval(scraper);
      (enabled ? on : off).push(r);
    }
  }
  await child.call({ cmd: 'metrics', on: true });
  const micro = await child.call<{ on: number; off: number }>({ cmd: 'metricsMicro', n: 200_000 });
  await closeChild(child);
  const mean = (rs: Measured[], k: 'rps' | 'p50' | 'p99') => rs.reduce((n, r) => n + r[k], 0) / rs.length;
  // Server CPU per request: what the instrumentation adds, barely moved by other work on the machine
  // (throughput is, when the machine is shared).
  const cpuPerReq = (rs: Measured[]) =>
    rs.reduce((n, r) => n + r.step.server.cpuMs, 0) /
    Math.max(
      1,
      rs.reduce((n, r) => n + r.ok, 0),
    );
  const pct = (x: number) => `${(x * 100).toFixed(0)} %`;
  const pairs = on.map((r, i) => r.rps / off[i]!.rps);
  const cpuCost = cpuPerReq(on) / cpuPerReq(off) - 1;
  // The recording itself (the real functions, in the server process) against a request's CPU.
  const recordUs = Math.max(0, micro.on - micro.off);
  const recordCost = recordUs / (cpuPerReq(off) * 1000);
  facts.metricsOnRps = mean(on, 'rps');
  facts.metricsOffRps = mean(off, 'rps');
  facts.metricsOnCpuUsPerReq = cpuPerReq(on) * 1000;
  facts.metricsOffCpuUsPerReq = cpuPerReq(off) * 1000;
  facts.metricsCpuCostPct = cpuCost * 100;
  facts.metricsRecordUsPerReq = recordUs;
  facts.metricsRecordCostPct = recordCost * 100;
  notes.push(
    `Instrumentation: server CPU per POST /runs ${(cpuPerReq(on) * 1000).toFixed(0)} µs on vs ${(cpuPerReq(off) * 1000).toFixed(0)} µs off ` +
      `(${cpuCost >= 0 ? '+' : ''}${(cpuCost * 100).toFixed(1)} %); throughput on/off per pair ${pairs.map(pct).join(', ')}; ` +
      `what one POST /runs records costs ${recordUs.toFixed(2)} µs of CPU (${(recordCost * 100).toFixed(2)} % of a request's), measured alone over 200 000 requests.`,
  );
  rows.push({
    group: 'Run acceptance',
    name: `POST /runs, instrumentation on vs off (${rounds} alternating pairs; CPU/request ${cpuCost >= 0 ? '+' : ''}${(cpuCost * 100).toFixed(1)} %, recording alone ${(recordCost * 100).toFixed(2)} %)`,
    clients: '32',
    value: rate(mean(on, 'rps')),
    p50: mean(on, 'p50'),
    p99: mean(on, 'p99'),
    baseline: `off ${rate(mean(off, 'rps'))}`,
    baseP50: mean(off, 'p50'),
    baseP99: mean(off, 'p99'),
    ratio: ratio(mean(on, 'rps'), mean(off, 'rps')),
    target: 'cost ≤ 5 %',
    // Throughput and CPU per request of a shared machine swing by more than 5 % between rounds; the
    // recording's own cost is the figure that does not.
    verdict: recordCost <= 0.05 ? 'met' : 'MISS',
  });
}
