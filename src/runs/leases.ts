import { query } from '../db/statement.ts';
import { CLAIM_RUN_LEASE, CLAIM_UNLEASED_RUNS, RELEASE_RUN_LEASES, RENEW_RUN_LEASES, SWEEP_DUE } from '../sql/run-leases.ts';
import { fork, type RunsDeps } from './deps.ts';

/**
 * Run leases (runs.lease_owner / lease_until): the embedded engine instance that holds a run's lease is
 * its only driver. A lease expires unless renewed; finishRun clears it.
 */

export interface LeaseHolder {
  owner: string;
  ttlMs: number;
}

/** Claims every run of `engine` nobody drives (lease expired or released) that has something to do now. */
export async function claimUnleasedRuns(deps: RunsDeps, holder: LeaseHolder, engine: string): Promise<string[]> {
  const rows = await query<{ id: string }>(fork(deps), CLAIM_UNLEASED_RUNS, [holder.owner, holder.ttlMs / 1000, engine]);
  return rows.map((r) => String(r.id));
}

/** Extends the leases `holder` still holds among `runIds`; returns those. */
export async function renewLeases(deps: RunsDeps, holder: LeaseHolder, runIds: string[]): Promise<Set<string>> {
  const rows = await query<{ id: string }>(fork(deps), RENEW_RUN_LEASES, [holder.ttlMs / 1000, holder.owner, runIds]);
  return new Set(rows.map((r) => String(r.id)));
}

/** Takes the lease of a non-terminal run that nobody else holds; true when `holder` holds it now. */
export async function claimRun(deps: RunsDeps, holder: LeaseHolder, runId: string): Promise<boolean> {
  return (await query(fork(deps), CLAIM_RUN_LEASE, [holder.owner, holder.ttlMs / 1000, runId])).length > 0;
}

/** Gives up `holder`'s leases of these runs (parked, or the engine is stopping). */
export async function releaseLeases(deps: RunsDeps, holder: LeaseHolder, runIds: string[]): Promise<void> {
  await query(fork(deps), RELEASE_RUN_LEASES, [holder.owner, runIds]);
}

/** What the embedded engine's sweep would find now or later (SWEEP_DUE): whether runs are queued, and when the next run in flight is due. */
export async function sweepDue(deps: RunsDeps, holder: LeaseHolder, engine: string): Promise<{ queued: boolean; dueAt: number | null }> {
  const values = [engine, holder.owner, deps.config.credentialsWaitSeconds];
  const [row] = await query<{ queued: boolean; due_ms: number | string | null }>(fork(deps), SWEEP_DUE, values);
  return { queued: row?.queued === true, dueAt: row?.due_ms === null || row?.due_ms === undefined ? null : Number(row.due_ms) };
}
