import type { Em } from '../db/orm.ts';
import type { Action, FreeAction } from '../domain/graph/interpreter.ts';
import { freeActionEffects, pendingActions } from '../domain/run-steps.ts';
import { fork, type RunsDeps } from './deps.ts';
import { fencedWrite, publish } from './fenced-write.ts';
import type { Written } from './written.ts';
import { isTerminal, type RunStatus } from '../domain/run-status.ts';
import { graphOf, readRun, runMeta } from './run-state.ts';

/** Free actions (resolve, skip, timers): the interpreter's actions other than `execute`. */

export interface ApplyResult {
  /** False when the run is terminal (or gone): nothing was written. */
  applied: boolean;
  status: RunStatus | null;
}

/** One statement, fenced on none of the actions being recorded yet: the common case. */
async function applyActionsFast(em: Em, runId: string, actions: FreeAction[]): Promise<Written | null> {
  const meta = await runMeta(em, runId);
  if (!meta) return null;
  const fx = freeActionEffects(await graphOf(em, meta.versionId), actions);
  return fencedWrite(em, runId, {
    statuses: ['running', 'suspended'],
    absentResults: actions.map((a) => a.nodeId),
    absentTimers: actions.filter((a) => a.type === 'start_timer').map((a) => a.nodeId),
    progress: { results: fx.results, addTimers: fx.addTimers, removeTimers: fx.removeTimers },
    events: fx.events,
  });
}

/** Under the run row lock: drops what an earlier attempt already recorded, records the rest. */
async function applyActionsLocked(tx: Em, runId: string, actions: FreeAction[]): Promise<Applied> {
  const run = await readRun(tx, runId, true);
  if (!run) return { applied: false, written: null, status: null };
  if (isTerminal(run.status) || run.status === 'pending') return { applied: false, written: null, status: run.status };
  const todo = pendingActions(run.progress, actions);
  if (todo.length === 0) return { applied: true, written: null, status: run.status };
  const fx = freeActionEffects(await graphOf(tx, run.versionId), todo);
  const written = await fencedWrite(tx, runId, {
    statuses: ['running', 'suspended'],
    progress: { results: fx.results, addTimers: fx.addTimers, removeTimers: fx.removeTimers },
    events: fx.events,
  });
  return { applied: written !== null, written, status: run.status };
}

/** Whether the actions are recorded (now or before), and what this call wrote (null: nothing). */
interface Applied {
  applied: boolean;
  written: Written | null;
  status: RunStatus | null;
}

export async function applyActionsIn(em: Em, runId: string, actions: FreeAction[], inTransaction: boolean): Promise<Applied> {
  const free = actions.filter((a) => (a as Action).type !== 'execute');
  if (free.length === 0) return { applied: true, written: null, status: null };
  const fast = await applyActionsFast(em, runId, free);
  if (fast !== null) return { applied: true, written: fast, status: null };
  return inTransaction ? applyActionsLocked(em, runId, free) : em.transactional((tx) => applyActionsLocked(tx, runId, free));
}

/**
 * Records the interpreter's free actions in one statement: results of resolved and skipped nodes,
 * started and fired timers, with their events (`node.skipped`, `node.completed` for conditions, outputs
 * and fired delays, `node.started` for a started delay). Fenced on a non-terminal run; actions already
 * recorded (a retry) are ignored.
 */
export async function applyActions(deps: RunsDeps, runId: string, actions: FreeAction[]): Promise<ApplyResult> {
  const r = await applyActionsIn(fork(deps), runId, actions, false);
  publish(deps, runId, r.written);
  return { applied: r.applied, status: r.status };
}
