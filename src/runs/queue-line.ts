import type { Em } from '../db/orm.ts';
import { fork, type RunsDeps } from './deps.ts';
import { query } from '../db/statement.ts';
import { LINE_POSITIONS, NUMBER_BATCH, NUMBER_QUEUED_RUNS } from '../sql/queue-line.ts';

/**
 * The line of queued runs, with places that are exact and cheap at any depth (docs/design/rules.md,
 * "Queue and capacity"; docs/scaling.md).
 *
 * Every queued run gets a place number, `runs.queue_seq`, soon after it is accepted: 1, 2, 3, … in
 * acceptance order, without gaps, never reused. The line is ordered by (queue_seq, then runs not
 * numbered yet by acceptance time and id). The place of a numbered run r is then the number of queued
 * runs numbered from the head H (the lowest number still queued) to r, which is
 *   r.queue_seq − H + 1 − (numbered runs between H and r that have left the line),
 * two index probes and a count of the runs that left out of order (cancelled from the middle, admitted
 * past an account at its limit, timed out): a short range of `runs_queue_left_idx`, whatever the depth.
 * A run not numbered yet is behind every numbered one: its place is the numbered runs still queued plus
 * the count of unnumbered runs up to it (`runs_queue_fresh_idx`, the runs of the last moments).
 *
 * Numbering is done by `numberQueuedRuns` under an exclusive advisory lock (QUEUE_GATE); every insert of a
 * queued run takes the same lock shared until its commit (GATE_CTE, src/sql/queue-line.ts). So while numbers are handed out no
 * acceptance is in flight: every unnumbered run any reader can see is numbered in the same transaction,
 * in the order readers saw it, and no run accepted later can commit in between and change the order.
 * Numbers are assigned in one transaction from the highest number in use, so they have no gaps.
 */

/**
 * How soon after an acceptance the process numbers the runs accepted meanwhile. A run admitted within
 * that time is never numbered (a number is one more row version of the run, and numbering makes every
 * acceptance wait for the gate), and the unnumbered tail a place read counts stays about this long.
 */
const NUMBER_AFTER_MS = 1000;

/**
 * Numbers unnumbered queued runs, oldest first; returns how many. Every acceptance waits while the gate
 * is held, so the gate and the numbering are one statement, a function call (never held across a round
 * trip to this process, which a busy event loop makes long), whose commit does not wait for the disk.
 */
export async function numberQueuedRuns(em: Em): Promise<number> {
  const [row] = await query<{ numbered: number }>(em, NUMBER_QUEUED_RUNS, [NUMBER_BATCH]);
  return Number(row?.numbered ?? 0);
}

interface Numberer {
  timer?: NodeJS.Timeout;
  running?: Promise<void>;
}
const numberers = new WeakMap<object, Numberer>();

/**
 * After an acceptance: numbers the runs accepted meanwhile, shortly, once per process however many
 * were accepted. Places are exact before that too; numbering only keeps the unnumbered tail short.
 */
export function scheduleNumbering(deps: Pick<RunsDeps, 'orm' | 'log'>): void {
  let n = numberers.get(deps.orm);
  if (!n) numberers.set(deps.orm, (n = {}));
  const state = n;
  if (state.timer) return;
  state.timer = setTimeout(() => {
    state.running = (async () => {
      try {
        while ((await numberQueuedRuns(fork(deps))) === NUMBER_BATCH);
      } catch (err) {
        // The database may be closing; the next acceptance (in any process) numbers these runs too.
        deps.log.debug({ err }, 'queued runs were not numbered');
      }
    })().finally(() => {
      state.timer = undefined;
      state.running = undefined;
    });
  }, NUMBER_AFTER_MS);
  state.timer.unref();
}

/** Exact places of the given runs (those queued now), read in one statement. */
export async function linePositions(em: Em, ids: string[]): Promise<Map<string, number>> {
  if (!ids.length) return new Map();
  const rows = await query<{ id: string; position: string | number | null }>(em, LINE_POSITIONS, [ids]);
  return new Map(rows.filter((r) => r.position !== null).map((r) => [String(r.id), Number(r.position)]));
}
