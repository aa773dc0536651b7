import type { StatementEm } from '../db/statement.ts';
import type { Em } from '../db/orm.ts';
import { freeActionEffects, syncStepEvents, type BatchEntry, type NewRunEvent, type StepBatch } from '../domain/run-steps.ts';
import type { NodeResult } from '../domain/graph/types.ts';
import { fork, type RunsDeps } from './deps.ts';
import { fencedWrite, publish, type FencedWrite } from './fenced-write.ts';
import type { Written } from './written.ts';
import { applyActions } from './free-actions.ts';
import { recordKnownSyncStep } from './record-step.ts';
import { graphOf, runMeta } from './run-state.ts';

/** Batched in-memory steps: text.template / json.parse steps and the free actions between them. */

/**
 * The batch as ONE fenced write: every node in it must have no result yet (and no started timer), the run
 * must be running, and the compute limit must hold at each step as it would step by step. Compute grows
 * only with completed steps, so the last step's check is the binding one: compute + (completed steps
 * before it + 1) × step_usd ≤ limit. Returns what it wrote, or null when the fence did not hold.
 */
export async function writeBatch(em: Em, runId: string, entries: BatchEntry[]): Promise<Written | null> {
  const w = await batchWrite(em, runId, entries);
  return w ? fencedWrite(em, runId, w) : null;
}

/** The batch's fenced write (fenced on the run running; startAdmitted fences it on the admitted run instead). */
export async function batchWrite(em: StatementEm, runId: string, entries: BatchEntry[]): Promise<FencedWrite | null> {
  const meta = await runMeta(em, runId);
  if (!meta) return null;
  const graph = await graphOf(em, meta.versionId);
  const events: NewRunEvent[] = [];
  const results: Record<string, NodeResult> = {};
  const addTimers: Record<string, number> = {};
  const removeTimers: string[] = [];
  const absentResults: string[] = [];
  const absentTimers: string[] = [];
  let completed = 0;
  let limitSteps = 0;
  for (const e of entries) {
    if ('step' in e) {
      events.push(...syncStepEvents(e.step, e.result, e.deltas));
      results[e.step] = e.result;
      absentResults.push(e.step);
      limitSteps = completed + 1;
      if (e.result.status === 'completed') completed++;
      continue;
    }
    const fx = freeActionEffects(graph, e.actions);
    events.push(...fx.events);
    Object.assign(results, fx.results);
    Object.assign(addTimers, fx.addTimers);
    removeTimers.push(...fx.removeTimers);
    absentResults.push(...e.actions.map((a) => a.nodeId));
    absentTimers.push(...e.actions.filter((a) => a.type === 'start_timer').map((a) => a.nodeId));
  }
  return {
    statuses: ['running'],
    absentResults,
    absentTimers,
    computeLimitSteps: limitSteps > 0 ? limitSteps : undefined,
    progress: { results, addTimers, removeTimers },
    compute: { steps: completed },
    events,
  };
}

/**
 * Records a batch of in-memory steps in one statement. When its fence does not hold (the run ended or
 * was cancelled, a step would pass the compute limit, an entry was recorded by someone else), the
 * entries are recorded one by one through the step-by-step activities instead, which decide each case
 * exactly as if there had been no batch. Returns true when every entry was recorded.
 */
export async function recordBatch(deps: RunsDeps, runId: string, batch: StepBatch): Promise<{ recorded: boolean }> {
  if (batch.entries.length === 0) return { recorded: true };
  const written = await writeBatch(fork(deps), runId, batch.entries);
  if (written !== null) {
    publish(deps, runId, written);
    return { recorded: true };
  }
  return { recorded: await recordEntries(deps, runId, batch) };
}

export async function recordEntries(deps: RunsDeps, runId: string, batch: StepBatch): Promise<boolean> {
  for (const e of batch.entries) {
    if ('step' in e) {
      const outcome = await recordKnownSyncStep(deps, { runId, nodeId: e.step, known: batch.known });
      if (outcome?.type !== 'recorded') return false;
    } else {
      const applied = await applyActions(deps, runId, e.actions);
      if (!applied.applied) return false;
    }
  }
  return true;
}
