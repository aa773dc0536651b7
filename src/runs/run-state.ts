import type { Em } from '../db/orm.ts';
import { dateOrNull, json } from '../db/sql.ts';
import { freezeGraph } from '../domain/graph/analysis.ts';
import type { Graph, JsonValue, NodeResult } from '../domain/graph/types.ts';
import { fork, type RunsDeps } from './deps.ts';
import type { RunPhase, RunStatus } from '../domain/run-status.ts';
import { READ_RUN, READ_RUN_FOR_UPDATE, RUN_META, RUN_STATE, STATE_COLUMNS } from '../sql/runs.ts';
import { query, type StatementEm } from '../db/statement.ts';
import { VERSION_GRAPH } from '../sql/version-graph.ts';

/** A run's state as the engines drive it, read from its row (and its version's graph). */

export interface RunProgress {
  results: Record<string, NodeResult>;
  /** Started delay timers: nodeId → due time (epoch ms). */
  timers: Record<string, number>;
}

export interface RunState {
  runId: string;
  accountId: string;
  versionId: string;
  status: RunStatus;
  phase: RunPhase | null;
  suspendReason: 'wait_timer' | 'wait_signal' | null;
  /** Due time of a wait_timer suspension, epoch ms. */
  resumeAt: number | null;
  /** The buyer-safe reason of a failed run (read by loadRunState only; null otherwise). */
  reason?: string | null;
  /** A completed run's outcome (read by loadRunState only; null otherwise). */
  outcome?: string | null;
  credentialMode: 'service_hosted' | 'byok';
  graph: Graph;
  inputs: Record<string, JsonValue>;
  progress: RunProgress;
  computeUsd: string;
  computeLimitUsd: string;
  stepUsd: string;
  stepsExecuted: number;
  lastSequence: number;
}

// ---------------------------------------------------------------------------------------------------
// Caches of immutable facts: a version's graph never changes, nor does a run's version or account.

const CACHE_MAX = 5000;
const graphCache = new Map<string, Graph>();
const runMetaCache = new Map<string, { versionId: string; accountId: string }>();

function remember<K, V>(cache: Map<K, V>, key: K, value: V): V {
  if (cache.size >= CACHE_MAX) cache.delete(cache.keys().next().value as K);
  cache.set(key, value);
  return value;
}

export async function graphOf(em: StatementEm, versionId: string): Promise<Graph> {
  const hit = graphCache.get(versionId);
  if (hit) return hit;
  const [row] = await query<{ graph: unknown }>(em, VERSION_GRAPH, [versionId]);
  if (!row) throw new Error(`workflow version ${versionId} does not exist`);
  // Shared by every run of the version: frozen, so the interpreter keeps its analysis with it.
  return remember(graphCache, versionId, freezeGraph(json<Graph>(row.graph)));
}

/** The run's account when this process has seen the run (for log lines that have only the run id). */
export const knownRunAccount = (runId: string): string | undefined => runMetaCache.get(runId)?.accountId;

export async function runMeta(em: StatementEm, runId: string): Promise<{ versionId: string; accountId: string } | null> {
  const hit = runMetaCache.get(runId);
  if (hit) return hit;
  const [row] = await query<{ version_id: string; account_id: string }>(em, RUN_META, [runId]);
  if (!row) return null;
  return remember(runMetaCache, runId, { versionId: String(row.version_id), accountId: String(row.account_id) });
}

export interface RunRowLite {
  status: RunStatus;
  progress: RunProgress;
  inputs: Record<string, JsonValue>;
  /** One more step keeps the run's compute within its limit (wr_within_compute_limit). */
  nextStepFits: boolean;
  credentialMode: 'service_hosted' | 'byok';
  versionId: string;
  accountId: string;
}

export async function readRun(em: Em, runId: string, lock = false): Promise<RunRowLite | null> {
  const [r] = await query(em, lock ? READ_RUN_FOR_UPDATE : READ_RUN, [runId]);
  if (!r) return null;
  return {
    status: r.status as RunStatus,
    progress: normaliseProgress(r.progress),
    inputs: json<Record<string, JsonValue>>(r.inputs ?? {}),
    nextStepFits: r.next_step_fits === true,
    credentialMode: r.credential_mode as RunRowLite['credentialMode'],
    versionId: String(r.version_id),
    accountId: String(r.account_id),
  };
}

function normaliseProgress(raw: unknown): RunProgress {
  const p = raw === null || raw === undefined ? {} : json<Partial<RunProgress>>(raw);
  return { results: p.results ?? {}, timers: p.timers ?? {} };
}

export { STATE_COLUMNS };

export async function stateFromRow(em: StatementEm, runId: string, r: Record<string, unknown>): Promise<RunState> {
  const versionId = String(r.version_id);
  remember(runMetaCache, runId, { versionId, accountId: String(r.account_id) });
  return {
    runId,
    accountId: String(r.account_id),
    versionId,
    status: r.status as RunStatus,
    phase: (r.phase as RunPhase | null) ?? null,
    suspendReason: (r.suspend_reason as RunState['suspendReason']) ?? null,
    resumeAt: dateOrNull(r.resume_at)?.getTime() ?? null,
    reason: typeof r.reason === 'string' ? r.reason : null,
    outcome: typeof r.outcome === 'string' ? r.outcome : null,
    credentialMode: r.credential_mode as RunState['credentialMode'],
    graph: await graphOf(em, versionId),
    inputs: json<Record<string, JsonValue>>(r.inputs ?? {}),
    progress: normaliseProgress(r.progress),
    computeUsd: String(r.compute_usd),
    computeLimitUsd: String(r.compute_limit_usd),
    stepUsd: String(r.step_usd),
    stepsExecuted: Number(r.steps_executed),
    lastSequence: Number(r.last_sequence),
  };
}

export async function loadRunState(deps: RunsDeps, runId: string): Promise<RunState | null> {
  const em = fork(deps);
  const [r] = await query(em, RUN_STATE, [runId]);
  return r ? stateFromRow(em, runId, r) : null;
}
