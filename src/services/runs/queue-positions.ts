import type { Config } from '../../config/config.ts';
import type { Em } from '../../db/orm.ts';
import type { Deps } from '../deps.ts';
import { fork } from '../deps.ts';
import type { RunRow } from './run-views.ts';

export interface RunQueue {
  state: 'waiting' | 'starting';
  position: number;
  etaSeconds: number | null;
}

/**
 * Queue positions without a count of the whole queue per read. Every poll of a pending run (GET
 * /runs/{id}, each stream open, GraphQL `queue`) needs its place among the waiting runs, and counting
 * the entries before it is O(queue length), which a deep queue polled by many clients cannot afford.
 * Instead each service instance keeps, for at most SNAPSHOT_MS, the queue order read once (FIFO along
 * `runs_queue_idx`, the order admission follows) and the mean duration of recent runs for the ETA.
 *
 * Near the head of the queue, where places change with every admission and a reader acts on "next",
 * the place is counted exactly from the queue itself (at most EXACT_WITHIN index entries). Deeper in,
 * a run in the snapshot gets its place from it: at most SNAPSHOT_MS old, so it may still count runs that
 * were admitted or cancelled since (an estimate, as the ETA is). A run queued after the snapshot gets the
 * snapshot's size plus an exact count of the runs between the snapshot's last one and itself, which is
 * the short tail of the queue.
 */
const SNAPSHOT_MS = 1000;
/** Places up to this are counted exactly on every read (an index-only count of at most this many entries). */
const EXACT_WITHIN = 1000;
/** Beyond this, the rest of the queue is counted as a tail (bounds the snapshot's memory). */
const SNAPSHOT_MAX = 100_000;

interface Snapshot {
  takenAt: number;
  positions: Map<string, number>;
  /** The last run of the snapshot, from which tails are counted; null when the queue was empty. */
  lastId: string | null;
  meanSeconds: number | null;
}

interface InstanceState {
  snapshot?: Snapshot;
  loading?: Promise<Snapshot>;
}

/** Per service instance: keyed by its configuration object, which adapters pass along unchanged. */
const instances = new WeakMap<Config, InstanceState>();

async function readSnapshot(em: Em): Promise<Snapshot> {
  const takenAt = Date.now();
  const rows = await em.execute<{ id: string }[]>(
    `select id from runs where status = 'pending' and phase = 'queued' order by queued_at, id limit ${SNAPSHOT_MAX}`,
  );
  const [avg] = await em.execute<{ mean: number | null }[]>(
    `select avg(extract(epoch from completed_at - started_at))::float8 as mean from (
       select started_at, completed_at from runs
        where completed_at is not null and started_at is not null
        order by completed_at desc limit 50) recent`,
  );
  const positions = new Map<string, number>();
  rows.forEach((r, i) => positions.set(String(r.id), i + 1));
  return {
    takenAt,
    positions,
    lastId: rows.length ? String(rows[rows.length - 1]!.id) : null,
    meanSeconds: avg?.mean === null || avg?.mean === undefined ? null : Number(avg.mean),
  };
}

function currentSnapshot(deps: Pick<Deps, 'orm' | 'config'>): Promise<Snapshot> {
  let state = instances.get(deps.config);
  if (!state) instances.set(deps.config, (state = {}));
  const s = state;
  if (s.snapshot && Date.now() - s.snapshot.takenAt < SNAPSHOT_MS) return Promise.resolve(s.snapshot);
  s.loading ??= readSnapshot(fork(deps))
    .then((snap) => (s.snapshot = snap))
    .finally(() => (s.loading = undefined));
  return s.loading;
}

/** Exact places counted from the head of the queue now. */
async function exactPositions(em: Em, ids: string[]): Promise<Map<string, number>> {
  const marks = ids.map(() => '?').join(', ');
  const rows = await em.execute<{ id: string; position: number }[]>(
    `select r.id, (select count(*) from runs q
                    where q.status = 'pending' and q.phase = 'queued' and (q.queued_at, q.id) <= (r.queued_at, r.id))::int as position
       from runs r where r.id in (${marks}) and r.status = 'pending' and r.phase = 'queued'`,
    ids,
  );
  return new Map(rows.map((r) => [String(r.id), Number(r.position)]));
}

/** Places of runs queued after the snapshot: its size plus the exact count of runs between its last one and each. */
async function tailPositions(em: Em, snap: Snapshot, ids: string[]): Promise<Map<string, number>> {
  if (!snap.lastId) return exactPositions(em, ids);
  const marks = ids.map(() => '?').join(', ');
  const rows = await em.execute<{ id: string; position: number }[]>(
        `select r.id, (select count(*) from runs q
                        where q.status = 'pending' and q.phase = 'queued'
                          and (q.queued_at, q.id) > (l.queued_at, l.id) and (q.queued_at, q.id) <= (r.queued_at, r.id))::int as position
           from runs r cross join runs l
          where l.id = ? and r.id in (${marks}) and r.status = 'pending' and r.phase = 'queued'`,
        [snap.lastId, ...ids],
      );
  return new Map(rows.map((r) => [String(r.id), snap.positions.size + Number(r.position)]));
}

/** Queue state of one run (see queueStates). */
export async function queueOf(deps: Pick<Deps, 'orm' | 'config'>, run: RunRow): Promise<RunQueue | null> {
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
  const snap = await currentSnapshot(deps);
  // Near the head (or in a short queue) every place is counted now; a run queued since the snapshot in
  // a long queue is at its tail.
  const nearHead = (id: string) => snap.positions.size <= EXACT_WITHIN || (snap.positions.get(id) ?? Infinity) <= EXACT_WITHIN;
  const exactIds = queued.filter((r) => nearHead(r.id)).map((r) => r.id);
  const tailIds = queued.filter((r) => !nearHead(r.id) && !snap.positions.has(r.id)).map((r) => r.id);
  const [exact, tail] = await Promise.all([
    exactIds.length ? exactPositions(fork(deps), exactIds) : new Map<string, number>(),
    tailIds.length ? tailPositions(fork(deps), snap, tailIds) : new Map<string, number>(),
  ]);
  const capacity = Math.max(1, deps.config.runCapacity);
  for (const run of queued) {
    const position = nearHead(run.id) ? exact.get(run.id) : (snap.positions.get(run.id) ?? tail.get(run.id));
    if (position === undefined) {
      out.set(run.id, null); // left the queue since it was read
      continue;
    }
    // Slots free up at capacity / mean run duration per second, so `position` runs ahead take this long.
    const etaSeconds = snap.meanSeconds === null ? null : Math.max(1, Math.ceil((position * snap.meanSeconds) / capacity));
    out.set(run.id, { state: 'waiting', position, etaSeconds });
  }
  return out;
}
