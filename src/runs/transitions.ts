import type { Em } from '../db/orm.ts';
import { fork, type RunsDeps } from './deps.ts';
import { fencedWrite, publish, publishTerminal } from './fenced-write.ts';
import { finishRun } from './finish-run.ts';
import type { RunStatus } from '../domain/run-status.ts';
import { query } from '../db/statement.ts';
import { RUN_STATUS } from '../sql/runs.ts';

/** Suspend, resume, fail: the transitions of a running run other than its completion. */

export interface SuspendArgs {
  reason: 'wait_timer';
  /** Due time, epoch ms. */
  resumeAt: number;
}

export interface TransitionResult {
  /** True when this call made the transition. */
  changed: boolean;
  status: RunStatus | null;
}

async function currentStatus(em: Em, runId: string): Promise<RunStatus | null> {
  const [r] = await query<{ status: RunStatus }>(em, RUN_STATUS, [runId]);
  return r?.status ?? null;
}

/** running → suspended (`run.suspended` with the reason). A run already suspended is left as it is. */
export async function suspendRun(deps: RunsDeps, runId: string, args: SuspendArgs): Promise<TransitionResult> {
  const em = fork(deps);
  const written = await fencedWrite(em, runId, {
    statuses: ['running'],
    move: { to: 'suspend', reason: args.reason, resumeAt: args.resumeAt },
    events: [{ type: 'run.suspended', data: { status: 'suspended', reason: args.reason } }],
  });
  publish(deps, runId, written);
  return { changed: written !== null, status: written !== null ? 'suspended' : await currentStatus(em, runId) };
}

/**
 * suspended → running (`run.resumed`). With `reason`, only a run suspended for that reason resumes
 * (credentials resume a wait_signal run, never a timer). A run already running is left as it is.
 */
export async function resumeRun(deps: RunsDeps, runId: string, opts: { reason?: 'wait_timer' | 'wait_signal' } = {}): Promise<TransitionResult> {
  const em = fork(deps);
  const written = await fencedWrite(em, runId, {
    statuses: ['suspended'],
    suspendedFor: opts.reason,
    move: { to: 'resume' },
    events: [{ type: 'run.resumed', data: { status: 'running' } }],
  });
  publish(deps, runId, written);
  return { changed: written !== null, status: written !== null ? 'running' : await currentStatus(em, runId) };
}

/** Ends a run as failed with a reason (compute charged), e.g. a graph that cannot make progress. */
export async function failRun(deps: RunsDeps, runId: string, reason: string): Promise<{ failed: boolean }> {
  const finished = await fork(deps).transactional((tx) => finishRun(tx, runId, { status: 'failed', charge: 'compute', reason }));
  publishTerminal(deps, runId, finished);
  return { failed: finished !== null };
}
