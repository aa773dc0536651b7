import { ApiError, errorBody, invalidInputs, invalidRequest, notFound, type InputErrorDetail } from '../domain/errors.ts';
import type { Graph, JsonValue } from '../domain/graph/types.ts';
import { isUuid } from '../domain/ids.ts';
import { inputNodes } from '../domain/inputs.ts';
import { jsonLimitProblem } from '../domain/json-limits.ts';
import { checkMetadata } from '../domain/run-metadata.ts';
import { json } from '../db/sql.ts';
import { outsideTransaction, query } from '../db/statement.ts';
import { runReplayed } from '../observability/metrics.ts';
import type { Principal } from '../domain/principal.ts';
import type { Deps } from './deps.ts';
import { findVersion, findVisibleWorkflow } from '../catalog/workflow-access.ts';
import { RUNS_TO_REPLAY } from '../sql/replay-runs.ts';
import { counting, startCountedRun } from './counted-start.ts';
import type { RateDecision, RateLimiter } from './rate-limiter.ts';
import { parseRunSelection, selectRuns } from './run-selection.ts';
import { startRuns } from './start-runs.ts';
import type { AcceptedRun } from './run-views.ts';

/**
 * Replays (docs/design/runs-in-sets.md#replay): a new run of a run's workflow with its inputs, started
 * through POST /runs' own start path (start-runs.ts), whose acceptance writes its `replay_of`, so every
 * rule of a new run holds (entitlement, inputs, spend cap, billing, idempotency). Password inputs are never kept once a run ends
 * (its secrets are deleted with it), so they are asked for again.
 */

export interface ReplayOptions {
  /** Merged over the run's inputs (keys: node id or name). */
  inputs: Record<string, JsonValue>;
  /** `current`: the version POST /runs would pick now; null: the run's own version. */
  version: 'current' | null;
  /** The new run's metadata, or undefined: the run's. */
  metadata: unknown;
}

const OPTION_KEYS = ['inputs', 'version', 'metadata'] as const;

/** What a run replays with: its workflow, version, public inputs and metadata. */
interface ReplayedRun {
  id: string;
  workflowId: string;
  versionId: string;
  inputs: Record<string, JsonValue>;
  metadata: Record<string, string>;
}

/** A replay body's options (`{}` or no body: the run as it was). */
export function parseReplayOptions(body: unknown, extra: readonly string[] = []): ReplayOptions {
  if (body === undefined || body === null) return { inputs: {}, version: null, metadata: undefined };
  if (typeof body !== 'object' || Array.isArray(body)) throw invalidRequest('the request body must be a JSON object');
  const given = body as Record<string, unknown>;
  const allowed = [...OPTION_KEYS, ...extra];
  const unknown = Object.keys(given).find((k) => !allowed.includes(k));
  if (unknown !== undefined) throw invalidRequest(`unknown member "${unknown}"; allowed: ${allowed.join(', ')}`);
  if (given.inputs !== undefined && (typeof given.inputs !== 'object' || given.inputs === null || Array.isArray(given.inputs))) {
    throw invalidRequest('"inputs" must be an object keyed by input nodeId or name');
  }
  if (given.version !== undefined && given.version !== null && given.version !== 'current') {
    throw invalidRequest('"version" is "current" or absent (the run\'s own version)');
  }
  // The body's own faults are the call's 400, not one refusal per replayed run.
  const problem = jsonLimitProblem(given);
  if (problem) throw invalidRequest(problem);
  if (given.metadata !== undefined) checkMetadata(given.metadata);
  return { inputs: (given.inputs ?? {}) as Record<string, JsonValue>, version: given.version === 'current' ? 'current' : null, metadata: given.metadata };
}

/** POST /runs/{id}/replay, counted in the key's rate window as a POST /runs. */
export async function replayRun(
  deps: Deps,
  principal: Principal,
  limiter: RateLimiter,
  runId: string,
  read: () => Promise<{ body: unknown; idempotencyHeader?: string; cancelAfterHeader?: string }>,
) {
  const result = await startCountedRun(deps, principal, limiter, async () => {
    const req = await read();
    const options = parseReplayOptions(req.body);
    const [run] = isUuid(runId) ? await replayedRuns(deps, principal.accountId, [runId]) : [];
    if (!run) throw notFound('run');
    return { ...req, body: await replayBody(deps, principal.accountId, run, options), replayOf: run.id };
  }).catch((err: unknown) => {
    if (err instanceof ApiError) runReplayed('refused');
    throw err;
  });
  if (!result.replayed) runReplayed('accepted');
  return result;
}

export type ReplayItem = { index: number; run: AcceptedRun } | { index: number; error: ReturnType<typeof errorBody> };

/**
 * POST /runs/replay: each run named by `ids` or matched by `filter` replayed, in order, one item each,
 * as a set through the one start path (start-runs.ts: one acceptance statement, which writes each new
 * run's `replay_of`). With `limiter` (REST) the call is one request in the key's rate window and its
 * replays draw on the key's run budget as a batch's items do: all or none, 429 when it cannot hold them.
 */
export async function replayRuns(deps: Deps, principal: Principal, body: unknown, limiter?: RateLimiter) {
  if (!limiter) return { ...(await replaySet(deps, principal, body)), rateLimit: undefined, runBudget: undefined };
  return counting(
    principal,
    limiter,
    async () => body,
    async (_body, rateLimit) => {
      const draw = (runs: number) => limiter.draw(principal.apiKeyId, principal.runBudgetPerMinute, runs);
      return { ...(await replaySet(deps, principal, body, draw)), rateLimit };
    },
  );
}

/** The replays of a selection: each run's replay body built (or refused), the budget drawn for them, then started together. */
async function replaySet(deps: Deps, principal: Principal, body: unknown, draw?: (runs: number) => Promise<RateDecision>) {
  const selection = parseRunSelection(body, OPTION_KEYS);
  const given = body as Record<string, unknown>;
  const options = parseReplayOptions(Object.fromEntries(OPTION_KEYS.filter((k) => given[k] !== undefined).map((k) => [k, given[k]])));
  const selected = await selectRuns(deps, principal.accountId, selection);
  const runs = new Map(
    (
      await replayedRuns(
        deps,
        principal.accountId,
        selected.runs.map((r) => r.id),
      )
    ).map((r) => [r.id, r]),
  );
  const order = selection.kind === 'ids' ? selection.ids.map((id) => id.toLowerCase()) : selected.runs.map((r) => r.id);
  const items = new Array<ReplayItem>(order.length);
  const toStart: { index: number; body: Record<string, unknown>; replayOf: string }[] = [];
  for (const [index, id] of order.entries()) {
    try {
      const run = runs.get(id);
      if (!run) throw notFound('run');
      toStart.push({ index, body: await replayBody(deps, principal.accountId, run, options), replayOf: run.id });
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      items[index] = { index, error: errorBody(err) };
    }
  }
  const runBudget = draw && toStart.length > 0 ? await draw(toStart.length) : undefined;
  const outcomes = await startRuns(
    deps,
    principal,
    toStart.map((s) => s.body),
    { cancelAfterSeconds: null, replayOf: toStart.map((s) => s.replayOf) },
  );
  outcomes.forEach((o, i) => {
    const index = toStart[i].index;
    items[index] = 'error' in o ? { index, error: errorBody(o.error) } : { index, run: o.run };
  });
  const accepted = items.filter((i) => 'run' in i).length;
  runReplayed('accepted', accepted);
  runReplayed('refused', items.length - accepted);
  const page = selection.kind === 'filter' ? { nextCursor: selected.nextCursor } : {};
  return { body: { items, accepted, refused: items.length - accepted, ...page }, runBudget };
}

async function replayedRuns(deps: Deps, accountId: string, ids: string[]): Promise<ReplayedRun[]> {
  if (ids.length === 0) return [];
  const rows = await query(outsideTransaction(deps.orm), RUNS_TO_REPLAY, [ids, accountId]);
  return rows.map((r) => ({
    id: String(r.id),
    workflowId: String(r.workflow_id),
    versionId: String(r.version_id),
    inputs: json<Record<string, JsonValue>>(r.inputs),
    metadata: json<Record<string, string>>(r.metadata ?? '{}'),
  }));
}

/** The POST /runs body of a replay of `run`: its workflow, version, inputs with the options' merged over them, metadata. */
async function replayBody(deps: Deps, accountId: string, run: ReplayedRun, options: ReplayOptions): Promise<Record<string, unknown>> {
  const em = outsideTransaction(deps.orm);
  const graph =
    options.version === 'current'
      ? (await findVisibleWorkflow(em as never, accountId, run.workflowId))?.shownVersion?.graph
      : (await findVersion(em, run.workflowId, run.versionId))?.graph;
  return {
    workflow: run.workflowId,
    ...(options.version === 'current' ? {} : { version: run.versionId }),
    inputs: graph ? mergedInputs(graph, run.inputs, options.inputs) : options.inputs,
    metadata: options.metadata === undefined ? run.metadata : options.metadata,
  };
}

/**
 * The run's inputs of `graph`'s input nodes, with `overrides` (by node id or unique name) over them; an
 * override naming no input passes as given, for the acceptance to refuse as POST /runs does. Every
 * password input must be overridden (null leaves an optional one empty): 400 invalid_inputs names the others.
 */
export function mergedInputs(graph: Graph, original: Record<string, JsonValue>, overrides: Record<string, JsonValue>): Record<string, JsonValue> {
  const nodes = inputNodes(graph);
  const byName = new Map<string, string[]>();
  for (const n of nodes) byName.set(n.name ?? n.id, [...(byName.get(n.name ?? n.id) ?? []), n.id]);
  const overridden = new Map<string, JsonValue>();
  const passing: Record<string, JsonValue> = {};
  for (const [key, value] of Object.entries(overrides)) {
    const id = nodes.some((n) => n.id === key) ? key : byName.get(key)?.length === 1 ? byName.get(key)![0] : null;
    if (id === null) passing[key] = value;
    else overridden.set(id, value);
  }
  const merged: Record<string, JsonValue> = {};
  const missing: InputErrorDetail[] = [];
  for (const n of nodes) {
    if (overridden.has(n.id)) merged[n.id] = overridden.get(n.id)!;
    else if (n.kind === 'input.password') {
      const message = `input "${n.id}" (${n.name ?? n.id}) is a password: its value was deleted when the run ended; give it again in "inputs"`;
      missing.push({ input: n.id, message });
    } else if (original[n.id] !== undefined && original[n.id] !== null) merged[n.id] = original[n.id]!;
  }
  if (missing.length > 0) throw invalidInputs(missing);
  return { ...merged, ...passing };
}
