import type { Config } from '../config/config.ts';
import type { Deps } from './deps.ts';
import type { RunQueue, RunRow } from './run-row.ts';
import { outsideTransaction, query, type StatementEm } from '../db/statement.ts';
import { RECENT_RUN_MEAN } from '../sql/runs.ts';
import { LINE_POSITIONS } from '../sql/queue-places.ts';

/**
 * Queue state of pending runs. The place is exact on every read, at any depth, on every process: it is
 * counted in the queue's order (src/sql/queue-places.ts), with the run's row when the run was read
 * by id, else in one statement for every run asked about. Only the ETA is an estimate: the mean duration of recent runs, kept per service instance for at
 * most MEAN_MS.
 */
const MEAN_MS = 1000;

interface Mean {
  takenAt: number;
  seconds: number | null;
}

interface InstanceState {
  mean?: Mean;
  loading?: Promise<Mean>;
}

/** Per service instance: keyed by its configuration object, which adapters pass along unchanged. */
const instances = new WeakMap<Config, InstanceState>();

async function readMean(em: StatementEm): Promise<Mean> {
  const takenAt = Date.now();
  const [avg] = await query<{ mean: number | null }>(em, RECENT_RUN_MEAN, []);
  return { takenAt, seconds: avg?.mean === null || avg?.mean === undefined ? null : Number(avg.mean) };
}

function currentMean(deps: Pick<Deps, 'orm' | 'config'>): Promise<Mean> {
  let state = instances.get(deps.config);
  if (!state) instances.set(deps.config, (state = {}));
  const s = state;
  if (s.mean && Date.now() - s.mean.takenAt < MEAN_MS) return Promise.resolve(s.mean);
  s.loading ??= readMean(outsideTransaction(deps.orm))
    .then((mean) => (s.mean = mean))
    .finally(() => (s.loading = undefined));
  return s.loading;
}

/** Exact places of the given runs (those queued now), read in one statement. */
export async function linePositions(em: StatementEm, ids: string[]): Promise<Map<string, number>> {
  if (!ids.length) return new Map();
  const rows = await query<{ id: string; position: string | number | null }>(em, LINE_POSITIONS, [ids]);
  return new Map(rows.filter((r) => r.position !== null).map((r) => [String(r.id), Number(r.position)]));
}

/** Queue state of one run (see queueStates); a run that is not pending has none, and is not asked about. */
export async function queueOf(deps: Pick<Deps, 'orm' | 'config'>, run: RunRow): Promise<RunQueue | null> {
  if (run.status !== 'pending') return null;
  return (await queueStates(deps, [run])).get(run.id) ?? null;
}

/** Queue state of many runs: null unless pending; `starting` once admitted; else place and ETA. */
export async function queueStates(deps: Pick<Deps, 'orm' | 'config'>, rows: readonly RunRow[]): Promise<Map<string, RunQueue | null>> {
  const out = new Map<string, RunQueue | null>();
  const queued: RunRow[] = [];
  for (const run of rows) {
    if (run.status !== 'pending') out.set(run.id, null);
    else if (run.phase === 'starting') out.set(run.id, { state: 'starting', position: 0, etaSeconds: null });
    else if (run.phase !== 'queued') out.set(run.id, null);
    else queued.push(run);
  }
  if (!queued.length) return out;
  // Rows read by findRun/findAccountRun carry their place already; others (lists) are read in one statement.
  const unread = queued.filter((r) => r.queuePosition === undefined).map((r) => r.id);
  const [mean, read] = await Promise.all([currentMean(deps), unread.length ? linePositions(outsideTransaction(deps.orm), unread) : new Map<string, number>()]);
  const capacity = Math.max(1, deps.config.runCapacity);
  for (const run of queued) {
    const position = run.queuePosition ?? read.get(run.id);
    if (position === undefined || position === null) {
      out.set(run.id, null); // left the queue since the run was read
      continue;
    }
    // Slots free up at capacity / mean run duration per second, so `position` runs ahead take this long.
    const etaSeconds = mean.seconds === null ? null : Math.max(1, Math.ceil((position * mean.seconds) / capacity));
    out.set(run.id, { state: 'waiting', position, etaSeconds });
  }
  return out;
}
