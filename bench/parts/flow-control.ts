import { closeChild, startChild } from '../measure.ts';
import { httpJson } from '../load.ts';
import { rows } from '../results.ts';
import { log } from '../settings.ts';
import { BENCH_KEY, WORKFLOW_3 } from '../shared.ts';

// Part 1e of `npm run bench` (bench/run.ts): flow control (docs/design/flow-control.md) on the embedded engine:
// a run of key B behind key A's backlog, and a high run behind a normal backlog, counted from their acceptance.

/** The setting: 16 runs in flight at once, one account. */
const CAPACITY = 16;
const BACKLOG = 5000;

export async function flowControl(): Promise<void> {
  log(`flow control: starting the app (embedded engine, RUN_CAPACITY=${CAPACITY})`);
  const child = await startChild('embedded', { runCapacity: CAPACITY });
  const runs = `${child.ready.appUrl}/v1/runs`;
  const start = async (extra: Record<string, unknown>): Promise<string> => {
    const res = await httpJson('POST', runs, { key: BENCH_KEY, body: { workflow: WORKFLOW_3, inputs: { name: 'Ada' }, ...extra } });
    if (res.status !== 202) throw new Error(`POST /runs answered ${res.status}`);
    return String(res.body.run.id);
  };
  const backlog = async (extra: Record<string, unknown>): Promise<void> => {
    for (let from = 0; from < BACKLOG; from += 1000) {
      const items = Array.from({ length: 1000 }, () => ({ workflow: WORKFLOW_3, inputs: { name: 'Ada' }, ...extra }));
      const res = await httpJson('POST', `${runs}/batch`, { key: BENCH_KEY, body: { runs: items } });
      if (res.status !== 202 || res.body.accepted !== items.length) throw new Error(`POST /runs/batch answered ${res.status}`);
    }
  };
  /** Milliseconds from the run's acceptance to its start, polled. */
  const waitOf = async (id: string): Promise<number> => {
    for (;;) {
      const [row] = await child.sql<{ ms: number | null }>(`select extract(epoch from started_at - created_at) * 1000 as ms from runs where id = ?`, [id]);
      if (row?.ms !== null && row?.ms !== undefined) return Number(row.ms);
      await new Promise((r) => setTimeout(r, 5));
    }
  };
  const drained = async (): Promise<void> => {
    for (;;) {
      const [row] = await child.sql<{ n: number }>(`select count(*)::int as n from runs where status in ('pending', 'running')`);
      if (Number(row?.n) === 0) return;
      await new Promise((r) => setTimeout(r, 100));
    }
  };

  const alone = await waitOf(await start({ concurrencyKey: 'customer-b' }));
  await backlog({ concurrencyKey: 'customer-a' });
  const b = await start({ concurrencyKey: 'customer-b' });
  const behind = await waitOf(b);
  await drained();
  const [ahead] = await child.sql<{ n: number }>(
    `select count(*)::int as n from runs
      where concurrency_key = 'customer-a'
        and started_at > (select created_at from runs where id = ?) and started_at < (select started_at from runs where id = ?)`,
    [b, b],
  );
  // A round, behind a full line: admission takes up to RUN_CAPACITY runs as those in flight end, so a
  // round lasts what the line took to start A's runs, per RUN_CAPACITY of them.
  const [round] = await child.sql<{ ms: number }>(
    `select extract(epoch from max(started_at) - min(started_at)) * 1000 / greatest(count(*) / ${CAPACITY}.0, 1) as ms
       from runs where concurrency_key = 'customer-a' and started_at is not null`,
  );
  const roundMs = Number(round!.ms);
  const waitBound = 1.2 * alone + roundMs;
  rows.push({
    group: 'Flow control',
    name: `key B's run behind key A's ${BACKLOG} queued: A's runs started between B's acceptance and its start`,
    clients: '1',
    value: String(ahead!.n),
    baseline: `B's wait ${behind.toFixed(0)} ms, on an empty queue ${alone.toFixed(0)} ms, a round ${roundMs.toFixed(0)} ms`,
    ratio: alone > 0 ? `${(behind / alone).toFixed(2)}×` : '—',
    target: '< 50 (before A’s 50th), wait ≤ 1.2× alone + a round',
    verdict: ahead!.n < 50 && behind <= waitBound ? 'met' : 'MISS',
  });
  log(
    `flow control: B waited ${behind.toFixed(0)} ms behind the backlog (${alone.toFixed(0)} ms alone, a round ${roundMs.toFixed(0)} ms), after ${ahead!.n} of A's runs`,
  );

  await backlog({});
  const high = await start({ priority: 'high' });
  await waitOf(high);
  const [normalBefore] = await child.sql<{ n: number }>(
    `select count(*)::int as n from runs
      where priority = 1 and started_at > (select created_at from runs where id = ?) and started_at < (select started_at from runs where id = ?)`,
    [high, high],
  );
  rows.push({
    group: 'Flow control',
    name: `a high run behind ${BACKLOG} normal ones: normal runs started between its acceptance and its start`,
    clients: '1',
    value: String(normalBefore!.n),
    baseline: `RUN_CAPACITY ${CAPACITY}`,
    ratio: '—',
    target: `≤ ${CAPACITY} (the next round)`,
    verdict: normalBefore!.n <= CAPACITY ? 'met' : 'MISS',
  });
  await closeChild(child);
}
