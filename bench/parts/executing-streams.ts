import { randomBytes } from 'node:crypto';
import { DEFAULT_MAX_STREAMS_PER_KEY as MAX_STREAMS_PER_KEY } from '../../src/config/config.ts';
import { followRunStream, httpJson, pool, type RunStreamClient } from '../load.ts';
import type { ServerChild } from '../child.ts';
import { clockOffset, closeChild, measured, profiled, startChild } from '../measure.ts';
import { facts, notes, rows } from '../results.ts';
import { DB_LOCAL, LIVE_RUNS, log, sleep } from '../settings.ts';
import { BENCH_KEY, summarise, WORKFLOW_LIVE } from '../shared.ts';

// A step of the streams part (bench/parts/streams.ts): live delivery while LIVE_RUNS runs execute on the
// embedded engine, each followed by one stream of its own.

const TARGET_P99_MS = 50;

interface Round {
  ops: number;
  /** Per live event: arrival − its `ts` (written), and arrival − its publish on the bus. */
  writtenMs: number[];
  publishedMs: number[];
  /** Streams that did not end with every sequence from 1 on, in order, once each. */
  broken: number;
  seconds: number;
}

/**
 * Each of 64 clients starts a run (a few steps between short delays, so every run writes events for a
 * few seconds) and opens its stream at once, until LIVE_RUNS runs execute with a stream each; then it
 * waits until every stream ended after its run's terminal event.
 */
async function round(child: ServerChild, keys: string[]): Promise<Round> {
  const port = Number(new URL(child.ready.appUrl).port);
  await child.call({ cmd: 'publishes' });
  const t0 = performance.now();
  const clients = await pool(Array.from({ length: LIVE_RUNS }), 64, async (_x, i) => {
    const r = await httpJson('POST', `http://127.0.0.1:${port}/v1/runs`, { key: BENCH_KEY, body: { workflow: WORKFLOW_LIVE, inputs: { name: 'Ada' } } });
    if (r.status !== 202) throw new Error(`POST /runs answered ${r.status}: ${JSON.stringify(r.body)}`);
    const runId = String(r.body.run.id);
    return { runId, ...(await followRunStream(port, `/v1/runs/${runId}/stream`, keys[i % keys.length]!)) };
  });
  const ended = await Promise.race([Promise.all(clients.map((c) => c.ended)).then(() => true), sleep(60_000).then(() => false)]);
  for (const c of clients) c.close();
  if (!ended) notes.push(`Streams of executing runs: not every stream ended within 60 s.`);
  const seconds = (performance.now() - t0) / 1000;
  const publishes = await child.call<Record<string, number[]>>({ cmd: 'publishes' });
  const offset = await clockOffset(child);
  const writtenMs: number[] = [];
  const publishedMs: number[] = [];
  for (const c of clients) {
    const times = publishes[c.runId] ?? [];
    c.sequences.forEach((seq, i) => {
      if (!(c.written[i]! > c.openedAt)) return;
      writtenMs.push(c.arrived[i]! - c.written[i]!);
      // The first publish that covered it: [last sequence, wall ms] pairs in publish order.
      for (let k = 0; k < times.length; k += 2) {
        if (times[k]! >= seq) {
          publishedMs.push(c.arrived[i]! - (times[k + 1]! - offset));
          break;
        }
      }
    });
  }
  return { ops: writtenMs.length, writtenMs, publishedMs, broken: clients.filter((c) => !gapFree(c)).length, seconds };
}

const gapFree = (c: RunStreamClient) => c.sequences.length > 0 && c.sequences.every((seq, i) => seq === i + 1);

export async function executingStreams(): Promise<void> {
  const perKey = Math.max(1, Math.floor(MAX_STREAMS_PER_KEY / 2));
  const keys = Array.from({ length: Math.ceil(LIVE_RUNS / perKey) }, (_, i) => `wr_bench_live_${i}_${randomBytes(12).toString('hex')}`);
  log(`streams: starting the app (embedded engine, RUN_CAPACITY=${LIVE_RUNS}) for ${LIVE_RUNS} executing runs with a stream each`);
  const child = await startChild('embedded', { keys, runCapacity: LIVE_RUNS, publishTimes: true });
  const name = `live events while ${LIVE_RUNS} runs execute, a stream each`;
  const r = await measured(child, name, () => round(child, keys));
  await profiled(child, name, () => round(child, keys));
  await closeChild(child);

  const published = summarise(r.publishedMs);
  const written = summarise(r.writtenMs);
  facts.executingLiveP50 = published.p50;
  facts.executingLiveP99 = published.p99;
  facts.executingWrittenP99 = written.p99;
  log(
    `${name}: ${written.n} live events in ${r.seconds.toFixed(1)} s; published → received p50 ${published.p50.toFixed(1)} ms, p99 ${published.p99.toFixed(1)} ms; ` +
      `written → received p50 ${written.p50.toFixed(1)} ms, p99 ${written.p99.toFixed(1)} ms`,
  );
  for (const [what, s] of [
    ['published', published],
    ['written', written],
  ] as const) {
    rows.push({
      group: 'Streams',
      name: `live event delivery, ${what} → received, ${LIVE_RUNS} executing runs, one stream each`,
      clients: String(LIVE_RUNS),
      value: `${s.n} events`,
      p50: s.p50,
      p99: s.p99,
      baseline: '—',
      ratio: '—',
      // Delivery is what follows the commit; `ts` is taken inside the writing transaction, so written →
      // received also holds that transaction's wait for its locks and commit (informative).
      target: what === 'published' ? `p99 ≤ ${TARGET_P99_MS} ms` : '(informative: includes the writing transaction)',
      verdict: r.broken > 0 ? 'MISS' : what === 'written' ? '' : s.p99 <= TARGET_P99_MS ? 'met' : 'MISS',
    });
  }
  if (r.broken) notes.push(`Streams of executing runs: ${r.broken} of ${LIVE_RUNS} streams missed, repeated or reordered an event.`);
  notes.push(
    `Live delivery while runs execute: each of 64 clients starts a run (Bench live: two steps after delays of 1 and 0.5 s) and ` +
      `opens its stream, until ${LIVE_RUNS} run; an event counts when it was written after its stream's snapshot arrived; latency = arrival − ` +
      `the publish on the service's bus after the event's commit (server − driver clock offset corrected), and arrival − the event's \`ts\` ` +
      `(Postgres's clock_timestamp() in the statement that wrote it${DB_LOCAL ? ', same machine' : ', ANOTHER machine: clocks may differ'}).`,
  );
}
