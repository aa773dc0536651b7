import { randomBytes } from 'node:crypto';
import { DEFAULT_MAX_STREAMS_PER_KEY as MAX_STREAMS_PER_KEY } from '../../src/config/config.ts';
import { httpJson, openSse, pool, type SseClient } from '../load.ts';
import { clockOffset, closeChild, countKinds, measured, rate, ratio, startChild } from '../measure.ts';
import { facts, notes, rows } from '../results.ts';
import { HOT, LIVE_EVENTS, log, runBody, sleep, STREAMS } from '../settings.ts';
import { BENCH_KEY, summarise, WORKFLOW_3, type MemoryStats } from '../shared.ts';
import { executingStreams } from './executing-streams.ts';

// Part 4 of `npm run bench` (bench/run.ts): N concurrent SSE streams, their memory and live-event latency, vs bare node:http SSE.

async function liveLatency(clients: SseClient[], publish: (marker: string) => Promise<number>, offset: number): Promise<{ ms: number[]; missing: number }> {
  const ms: number[] = [];
  let missing = 0;
  for (let k = 0; k < LIVE_EVENTS; k++) {
    const marker = `bench-live-${k}-${randomBytes(3).toString('hex')}`;
    const published = (await publish(marker)) - offset;
    const deadline = performance.now() + 10_000;
    while (clients.some((c) => !c.seen.has(marker)) && performance.now() < deadline) await sleep(5);
    for (const c of clients) {
      const at = c.seen.get(marker);
      if (at === undefined) missing++;
      else ms.push(at - published);
    }
    await sleep(200);
  }
  return { ms, missing };
}

async function closeAll(clients: SseClient[]): Promise<void> {
  for (const c of clients) c.socket.destroy();
  await sleep(1000);
}

async function openMany(port: number, pathOf: (i: number) => string, key: (i: number) => string | null) {
  const openMs: number[] = [];
  const t0 = performance.now();
  const clients = await pool(Array.from({ length: STREAMS }), 128, async (_x, i) => {
    const s = performance.now();
    const c = await openSse(port, pathOf(i), key(i));
    openMs.push(performance.now() - s);
    return c;
  });
  return { clients, seconds: (performance.now() - t0) / 1000, open: summarise(openMs) };
}

export async function streams(): Promise<void> {
  await executingStreams();
  // The floor first, in its own server process, so neither RSS figure reuses pages freed by the other.
  log(`streams: opening ${STREAMS} bare node:http SSE responses (the floor, own server process)`);
  const floorChild = await startChild('null');
  const floorPort = Number(new URL(floorChild.ready.floorUrl!).port);
  const floorOffset = await clockOffset(floorChild);
  const m2 = await floorChild.call<MemoryStats>({ cmd: 'memory' });
  const bare = await openMany(
    floorPort,
    (i) => (i < HOT ? '/sse?hot=1' : '/sse'),
    () => null,
  );
  await sleep(1000);
  const m3 = await floorChild.call<MemoryStats>({ cmd: 'memory' });
  const bareLive = await liveLatency(bare.clients.slice(0, HOT), (marker) => floorChild.call<number>({ cmd: 'floorBroadcast', marker }), floorOffset);
  await closeAll(bare.clients);
  await closeChild(floorChild);

  const perKey = Math.max(1, Math.floor(MAX_STREAMS_PER_KEY / 2));
  const keys = Array.from({ length: Math.ceil(STREAMS / perKey) }, (_, i) => `wr_bench_stream_${i}_${randomBytes(12).toString('hex')}`);
  log(`streams: starting the app (NullEngine) with ${keys.length} extra API keys (limit ${MAX_STREAMS_PER_KEY} streams per key)`);
  const child = await startChild('null', { keys });
  const appPort = Number(new URL(child.ready.appUrl).port);
  const app = `${child.ready.appUrl}/v1/runs`;

  const coldCount = Math.max(1, Math.ceil((STREAMS - HOT) / 10));
  const created = await pool(Array.from({ length: coldCount + 1 }), 32, async () => {
    const r = await httpJson('POST', app, { key: BENCH_KEY, body: JSON.parse(runBody(WORKFLOW_3)) });
    if (r.status !== 202) throw new Error(`POST /runs answered ${r.status}`);
    return String(r.body.run.id);
  });
  const [hotRun, ...cold] = created as [string, ...string[]];
  const offset = await clockOffset(child);

  const m0 = await child.call<MemoryStats>({ cmd: 'memory' });
  log(`streams: opening ${STREAMS} service streams (${HOT} on one run, the rest 10 per run on ${cold.length} runs)`);
  const svc = await openMany(
    appPort,
    (i) => `/v1/runs/${i < HOT ? hotRun : cold[(i - HOT) % cold.length]}/stream`,
    (i) => keys[i % keys.length]!,
  );
  await sleep(1000);
  const m1 = await child.call<MemoryStats>({ cmd: 'memory' });
  const live = await measured(child, `live event → ${HOT} of ${STREAMS} streams`, async () => {
    const r = await liveLatency(svc.clients.slice(0, HOT), (marker) => child.call<number>({ cmd: 'appendLive', runId: hotRun, marker }), offset);
    return { ...r, ops: LIVE_EVENTS };
  });
  await countKinds(child, 'opening a stream (pending run)', 20, async () => {
    const c = await openSse(appPort, `/v1/runs/${cold[0]}/stream`, keys[keys.length - 1]!);
    c.socket.destroy();
    await sleep(20);
  });
  await closeAll(svc.clients);

  const kib = (a: MemoryStats, b: MemoryStats, k: 'heapUsed' | 'rss') => (b[k] - a[k]) / STREAMS / 1024;
  const heap = kib(m0, m1, 'heapUsed');
  const rss = kib(m0, m1, 'rss');
  const bareHeap = kib(m2, m3, 'heapUsed');
  const bareRss = kib(m2, m3, 'rss');
  facts.streamHeap = heap;
  facts.streamRss = rss;
  for (const [what, value, base] of [
    ['heap', heap, bareHeap],
    ['RSS', rss, bareRss],
  ] as const) {
    rows.push({
      group: 'Streams',
      name: `server memory per open SSE stream, ${what} (${STREAMS} streams)`,
      clients: String(STREAMS),
      value: `${value.toFixed(1)} KiB`,
      baseline: `bare SSE ${base.toFixed(1)} KiB`,
      ratio: base > 0 ? `${(value / base).toFixed(1)}×` : '—',
      target: '< 20 KiB',
      verdict: value < 20 ? 'met' : 'MISS',
    });
  }
  const l = summarise(live.ms);
  const bl = summarise(bareLive.ms);
  facts.liveP99 = l.p99;
  facts.liveSql = live.step.server.sql.statements / LIVE_EVENTS;
  rows.push({
    group: 'Streams',
    name: `live event delivery, publish → received, ${HOT} followers of one run (${STREAMS} open)`,
    clients: String(HOT),
    value: `${LIVE_EVENTS}×${HOT} events`,
    p50: l.p50,
    p99: l.p99,
    baseline: 'bare SSE write loop',
    baseP50: bl.p50,
    baseP99: bl.p99,
    ratio: '—',
    target: 'p99 ≤ 50 ms',
    verdict: live.missing === 0 && l.p99 <= 50 ? 'met' : 'MISS',
  });
  rows.push({
    group: 'Streams',
    name: 'opening a stream (128 opening at a time)',
    clients: '128',
    value: rate(STREAMS / svc.seconds, 'streams/s'),
    p50: svc.open.p50,
    p99: svc.open.p99,
    baseline: `bare SSE ${rate(STREAMS / bare.seconds, 'streams/s')}`,
    baseP50: bare.open.p50,
    baseP99: bare.open.p99,
    ratio: ratio(STREAMS / svc.seconds, STREAMS / bare.seconds),
    target: '—',
    verdict: '',
  });
  if (live.missing || bareLive.missing) notes.push(`Streams: ${live.missing} live events never arrived (service), ${bareLive.missing} (bare).`);
  notes.push(
    `Stream memory: after GC, (memoryUsage with the streams open − before) / ${STREAMS}; service heap ${mb(m0.heapUsed)} → ${mb(m1.heapUsed)}, ` +
      `RSS ${mb(m0.rss)} → ${mb(m1.rss)}; bare SSE (its own server process) heap ${mb(m2.heapUsed)} → ${mb(m3.heapUsed)}, RSS ${mb(m2.rss)} → ${mb(m3.rss)}. ` +
      `Live-event latency: wall clock at publish in the server (after the event's commit, before the bus notification) → arrival on the driver's socket; ` +
      `server − driver clock offset ${offset.toFixed(2)} ms, corrected.`,
  );
  await closeChild(child);
}

const mb = (b: number) => `${(b / 2 ** 20).toFixed(0)} MiB`;
