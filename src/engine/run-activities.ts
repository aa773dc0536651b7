import type { Em } from '../db/orm.ts';
import { dateOrNull, json } from '../db/sql.ts';
import type { Action, Finished } from '../domain/graph/interpreter.ts';
import { parseFrom, readPath, renderTemplate } from '../domain/graph/template.ts';
import { isInputKind, isStepKind, type Graph, type GraphNode, type JsonValue, type NodeResult, type Provider } from '../domain/graph/types.ts';
import { usd, ZERO, type Usd } from '../domain/money.ts';
import { fundRun, fundRunAtSettlement } from '../services/billing/fund-run.ts';
import { InsufficientFundsAtSettlement } from '../services/billing/settle-run.ts';
import { fork, type Deps } from '../services/deps.ts';
import type { NewRunEvent } from '../services/events/append-run-events.ts';
import { getPricing } from '../services/pricing.ts';
import { finishRun, type Finish, type FinishedRun, type LockedRun } from '../services/runs/finish-run.ts';
import { executeHttpRequest } from './activities/http-request.ts';
import { executeLlmChat } from './activities/llm-chat.ts';
import type { LlmUsage, NodeExecutionContext, NodeOutcome } from './activities/types.ts';

/**
 * The run activities: every durable step of a run, shared by the embedded engine and the Temporal
 * workflow (which calls exactly these as activities). Each one is `async (deps, args) => result` with
 * JSON-serialisable args and results, idempotent and safe to retry:
 *
 * - every state change is fenced in SQL on the run's status (and, for node results, on the node having
 *   no result yet), so a retry, a late step or a second process never records a result, an event or a
 *   charge twice, and nothing changes a terminal run;
 * - event sequences are allocated by bumping `runs.last_sequence` in the same statement that inserts
 *   the events (a data-modifying CTE), so they stay gap-free per run;
 * - bus notifications are published only after commit.
 *
 * Round trips are the cost that matters (each statement costs ~0.1 ms of CPU here), so: a
 * `text.template` / `json.parse` step is ONE statement (node.started, its deltas, its result, its
 * compute); an `llm.chat` / `http.request` step writes node.started, batched deltas (every ~50 ms or 20
 * chunks) and its result, one statement each; free actions are one statement; preparation and
 * completion are one transaction each (funding and settlement need one).
 */

export type ActivityDeps = Omit<Deps, 'engine'>;

export type RunStatus = 'pending' | 'running' | 'suspended' | 'completed' | 'failed' | 'cancelled';
export const TERMINAL_STATUSES: readonly RunStatus[] = ['completed', 'failed', 'cancelled'];
export const isTerminal = (s: string): boolean => (TERMINAL_STATUSES as readonly string[]).includes(s);

export const QUEUE_TIMEOUT_REASON = 'the run waited too long for capacity';
export const COMPUTE_LIMIT_REASON = 'compute limit reached';
export const STUCK_GRAPH_REASON = 'the workflow cannot make progress';

/** Chunks of output buffered before a delta flush, and the longest a chunk waits. */
const DELTA_FLUSH_CHUNKS = 20;
const DELTA_FLUSH_MS = 50;
const ADMISSION_LOCK = 727_001;

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
  phase: string | null;
  suspendReason: 'wait_timer' | 'wait_signal' | null;
  /** Due time of a wait_timer suspension, epoch ms. */
  resumeAt: number | null;
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

async function graphOf(em: Em, versionId: string): Promise<Graph> {
  const hit = graphCache.get(versionId);
  if (hit) return hit;
  const [row] = await em.execute<{ graph: unknown }[]>('select graph from workflow_versions where id = ?', [versionId]);
  if (!row) throw new Error(`workflow version ${versionId} does not exist`);
  return remember(graphCache, versionId, json<Graph>(row.graph));
}

async function runMeta(em: Em, runId: string): Promise<{ versionId: string; accountId: string } | null> {
  const hit = runMetaCache.get(runId);
  if (hit) return hit;
  const [row] = await em.execute<{ version_id: string; account_id: string }[]>('select version_id, account_id from runs where id = ?', [runId]);
  if (!row) return null;
  return remember(runMetaCache, runId, { versionId: String(row.version_id), accountId: String(row.account_id) });
}

// ---------------------------------------------------------------------------------------------------
// Fenced writes

interface FencedWrite {
  /** The run must currently have one of these statuses. */
  statuses: readonly RunStatus[];
  /** These nodes must not have a result yet. */
  absentResults?: string[];
  /** These delay nodes must not have a started timer. */
  absentTimers?: string[];
  /** compute_usd + step_usd must stay within compute_limit_usd (the step may start). */
  withinComputeLimit?: boolean;
  /** Extra `where` conditions with their parameters. */
  where?: { sql: string; params?: unknown[] }[];
  /** Extra `set` fragments with their parameters. */
  set?: { sql: string; params?: unknown[] }[];
  events: NewRunEvent[];
}

/**
 * One fenced update of the run row that allocates the events' sequences (bumping last_sequence) and
 * inserts the events, as a single statement (a data-modifying CTE): atomic without a transaction, and
 * one round trip. Returns the new last sequence, or null when the fence did not hold (nothing written).
 */
async function fencedWrite(em: Em, runId: string, w: FencedWrite): Promise<number | null> {
  const row = await fencedUpdate(em, runId, w, 'last_sequence');
  return row ? Number(row.last_sequence) : null;
}

/** fencedWrite returning the updated run row's `returning` columns (new values), or null. */
async function fencedUpdate(em: Em, runId: string, w: FencedWrite, returning: string): Promise<Record<string, unknown> | null> {
  const n = w.events.length;
  const sets = [`last_sequence = last_sequence + ${n}`, 'updated_at = now()'];
  const params: unknown[] = [];
  for (const s of w.set ?? []) {
    sets.push(s.sql);
    params.push(...(s.params ?? []));
  }
  const where = ['id = ?', `status in (${w.statuses.map((s) => `'${s}'`).join(', ')})`];
  params.push(runId);
  if (w.absentResults?.length) {
    where.push(`not jsonb_exists_any(coalesce(progress->'results', '{}'::jsonb), array[?]::text[])`);
    params.push(w.absentResults);
  }
  if (w.absentTimers?.length) {
    where.push(`not jsonb_exists_any(coalesce(progress->'timers', '{}'::jsonb), array[?]::text[])`);
    params.push(w.absentTimers);
  }
  if (w.withinComputeLimit) where.push('compute_usd + step_usd <= compute_limit_usd');
  for (const c of w.where ?? []) {
    where.push(c.sql);
    params.push(...(c.params ?? []));
  }
  const update = `update runs set ${sets.join(', ')} where ${where.join(' and ')} returning ${returning}`;
  if (n === 0) {
    const [row] = await em.execute<Record<string, unknown>[]>(prepared(update), params);
    return row ?? null;
  }
  params.push(runId); // the `?::uuid` before the values list
  const tuples = w.events.map((e, i) => {
    params.push(e.type, e.nodeId ?? null, JSON.stringify(e.data ?? {}));
    return `(${i + 1}, ?, ?, ?)`;
  });
  const [row] = await em.execute<Record<string, unknown>[]>(
    prepared(`with u as (${update}),
     e as (
       insert into run_events (run_id, sequence, type, node_id, data, ts)
       select v.run_id, u.last_sequence - ${n} + v.ord, v.type, v.node_id, v.data::jsonb, clock_timestamp()
         from u cross join (select t.*, ?::uuid as run_id from (values ${tuples.join(', ')}) as t(ord, type, node_id, data)) v
        order by v.ord)
     select * from u`),
    params,
  );
  return row ?? null;
}

/** `progress` with results merged in and timers added/removed, as one SQL expression. */
function progressSet(p: { results?: Record<string, NodeResult>; addTimers?: Record<string, number>; removeTimers?: string[] }) {
  const params: unknown[] = [JSON.stringify(p.results ?? {}), JSON.stringify(p.addTimers ?? {})];
  let timers = `(coalesce(progress->'timers', '{}'::jsonb) || ?::jsonb)`;
  if (p.removeTimers?.length) {
    timers = `(${timers} - array[?]::text[])`;
    params.push(p.removeTimers);
  }
  return {
    sql: `progress = progress || jsonb_build_object('results', coalesce(progress->'results', '{}'::jsonb) || ?::jsonb, 'timers', ${timers})`,
    params,
  };
}

const timestampFromMs = (ms: number) => ({ sql: 'resume_at = to_timestamp(?::float8 / 1000)', params: [ms] });

function publish(deps: ActivityDeps, runId: string, last: number | null | undefined): void {
  if (typeof last === 'number' && last > 0) deps.bus.publish(runId, last);
}

/** After a committed terminal transition: live readers, and the webhook dispatcher when outbox rows were written. */
function publishTerminal(deps: ActivityDeps, runId: string, finished: FinishedRun | null | undefined): void {
  if (!finished) return;
  publish(deps, runId, finished.last);
  if (finished.webhooks > 0) deps.webhooks?.notify();
}

interface RunRowLite {
  status: RunStatus;
  progress: RunProgress;
  inputs: Record<string, JsonValue>;
  computeUsd: string;
  stepUsd: string;
  computeLimitUsd: string;
  credentialMode: 'service_hosted' | 'byok';
  versionId: string;
  accountId: string;
}

async function readRun(em: Em, runId: string, lock = false): Promise<RunRowLite | null> {
  const [r] = await em.execute<Record<string, unknown>[]>(
    `select status, progress, inputs, compute_usd, step_usd, compute_limit_usd, credential_mode, version_id, account_id
       from runs where id = ?${lock ? ' for update' : ''}`,
    [runId],
  );
  if (!r) return null;
  return {
    status: r.status as RunStatus,
    progress: normaliseProgress(r.progress),
    inputs: json<Record<string, JsonValue>>(r.inputs ?? {}),
    computeUsd: String(r.compute_usd),
    stepUsd: String(r.step_usd),
    computeLimitUsd: String(r.compute_limit_usd),
    credentialMode: r.credential_mode as RunRowLite['credentialMode'],
    versionId: String(r.version_id),
    accountId: String(r.account_id),
  };
}

function normaliseProgress(raw: unknown): RunProgress {
  const p = raw === null || raw === undefined ? {} : json<Partial<RunProgress>>(raw);
  return { results: p.results ?? {}, timers: p.timers ?? {} };
}

const overComputeLimit = (r: Pick<RunRowLite, 'computeUsd' | 'stepUsd' | 'computeLimitUsd'>) =>
  usd(r.computeUsd).plus(usd(r.stepUsd)).greaterThan(usd(r.computeLimitUsd));

// ---------------------------------------------------------------------------------------------------
// Admission

export interface AdmitArgs {
  /** Runs that may be in flight at once (RUN_CAPACITY), over every process and engine. */
  capacity: number;
  /** Admit only runs accepted for this engine (`runs.engine`); all when omitted. */
  engine?: string;
  /** Embedded engine: claim the admitted runs' lease in the same statement. */
  lease?: { owner: string; ttlMs: number };
  /** Fail runs that waited past QUEUE_MAX_WAIT_SECONDS first (default true; a periodic caller may skip it in between). */
  expireQueued?: boolean;
}

const IN_FLIGHT = `(status in ('running', 'suspended') or (status = 'pending' and phase in ('starting', 'preparing')))`;

/**
 * Fails queued runs that waited longer than QUEUE_MAX_WAIT_SECONDS (not charged), then admits queued
 * runs in FIFO order (queued_at, id) while the in-flight count is below `capacity` and each account stays
 * below its `max_concurrent_runs`: admitted runs get phase `starting`. Serialised across processes by a
 * transaction-scoped advisory lock. Returns the admitted run ids.
 */
export async function admitQueuedRuns(deps: ActivityDeps, args: AdmitArgs): Promise<string[]> {
  return (await admitQueuedRunsDetailed(deps, args)).admitted;
}

export interface AdmitResult {
  admitted: string[];
  /** The admitted runs' state as admission left it (pending, phase `starting`), in `admitted` order. */
  states: RunState[];
  /** False when the queue is known to hold no other admissible run right now. */
  more: boolean;
}

/** admitQueuedRuns, also telling whether admissible runs may still be waiting (the engine skips idle admissions). */
export async function admitQueuedRunsDetailed(deps: ActivityDeps, args: AdmitArgs): Promise<AdmitResult> {
  const published: [string, FinishedRun][] = [];
  const window = Math.max(args.capacity * 4, 100);
  const result = await fork(deps).transactional(async (tx): Promise<AdmitResult> => {
    await tx.execute(`select pg_advisory_xact_lock(${ADMISSION_LOCK})`);
    if (args.expireQueued !== false) {
      const expired = await tx.execute<{ id: string }[]>(
        `select id from runs where status = 'pending' and phase = 'queued'
            and queued_at < clock_timestamp() - make_interval(secs => ?)
          order by queued_at, id limit 500`,
        [deps.config.queueMaxWaitSeconds],
      );
      for (const { id } of expired) {
        const finished = await finishRun(tx, String(id), { status: 'failed', charge: 'none', reason: QUEUE_TIMEOUT_REASON });
        if (finished !== null) published.push([String(id), finished]);
      }
    }

    // The head of the queue with, per row, the in-flight total and its account's in-flight count.
    const candidates = await tx.execute<{ id: string; account_id: string; max: number | null; used: number; total: number }[]>(
      prepared(`with inflight as (select account_id, count(*)::int as n from runs where ${IN_FLIGHT} group by account_id)
       select q.id, q.account_id, a.max_concurrent_runs as max, coalesce(i.n, 0)::int as used,
              (select coalesce(sum(n), 0)::int from inflight) as total
         from (select id, account_id, queued_at from runs
                where status = 'pending' and phase = 'queued'${args.engine ? ' and engine = ?' : ''}
                order by queued_at, id limit ${window}) q
         join accounts a on a.id = q.account_id
         left join inflight i on i.account_id = q.account_id
        order by q.queued_at, q.id`),
      args.engine ? [args.engine] : [],
    );
    if (candidates.length === 0) return { admitted: [], states: [], more: false };
    const free = args.capacity - Number(candidates[0]!.total);
    if (free <= 0) return { admitted: [], states: [], more: true };
    const used = new Map<string, number>();
    const picked: string[] = [];
    for (const c of candidates) {
      if (picked.length >= free) break;
      const acct = String(c.account_id);
      const n = used.get(acct) ?? Number(c.used);
      if (c.max !== null && c.max !== undefined && n >= Number(c.max)) continue;
      used.set(acct, n + 1);
      picked.push(String(c.id));
    }
    const more = candidates.length > picked.length;
    if (picked.length === 0) return { admitted: [], states: [], more };
    const lease = args.lease
      ? { sql: ', lease_owner = ?, lease_until = clock_timestamp() + make_interval(secs => ?)', params: [args.lease.owner, args.lease.ttlMs / 1000] }
      : { sql: '', params: [] };
    const rows = await tx.execute<Record<string, unknown>[]>(
      prepared(`update runs set phase = 'starting', updated_at = now()${lease.sql}
        where id in (?) and status = 'pending' and phase = 'queued' returning id, ${STATE_COLUMNS}`),
      [...lease.params, picked],
    );
    const states = await Promise.all(rows.map((r) => stateFromRow(tx, String(r.id), r)));
    return { admitted: states.map((st) => st.runId), states, more };
  });
  for (const [id, finished] of published) publishTerminal(deps, id, finished);
  return result;
}

// ---------------------------------------------------------------------------------------------------
// Preparation

export interface PrepareResult {
  status: RunStatus;
  /** True when this call funded and started the run (false on a retry that found it done). */
  started: boolean;
  /** The started run's state (saves a loadRunState), when this call started it. */
  state?: RunState;
}

/**
 * Funds an admitted run and starts it, in one transaction: `run.preparing`, funding (bundle, else a
 * wallet hold of the displayed price), then `run.started` (status running) or, when funds are
 * insufficient, the terminal `run.failed` (not charged). A run that is not pending is left as it is.
 */
export async function prepareRun(deps: ActivityDeps, runId: string): Promise<PrepareResult> {
  const em = fork(deps);
  // Fast path, one transaction: start the run, then fund it (the wallet row is locked only for the
  // last statements). When funding fails the transaction is rolled back and the careful path runs.
  let started: { last: number; state: RunState } | null = null;
  try {
    started = await em.transactional(async (tx) => {
      const run = await startAdmitted(tx, runId);
      if (!run) return null;
      const funding = await fundRun(tx, fundingArgs(runId, run));
      if (!funding.ok) throw new FundingFailed();
      return { last: Number(run.last_sequence), state: await stateFromRow(tx, runId, run) };
    });
  } catch (error) {
    if (!(error instanceof FundingFailed)) throw error;
  }
  if (started !== null) {
    publish(deps, runId, started.last);
    return { status: 'running', started: true, state: started.state };
  }
  return prepareCarefully(deps, runId);
}

class FundingFailed extends Error {}

/**
 * An admitted run becomes running, with `run.preparing` and `run.started`, in one statement; the caller's
 * transaction funds it. Returns the run's state columns (and what funding needs), or null when the run
 * is not an admitted pending run.
 */
async function startAdmitted(tx: Em, runId: string, entries: BatchEntry[] = []): Promise<Record<string, unknown> | null> {
  // A batch rides in the same statement: its results, compute and events after run.started.
  const batch = entries.length ? await batchWrite(tx, runId, entries) : null;
  if (entries.length && !batch) return null;
  return fencedUpdate(
    tx,
    runId,
    {
      statuses: ['pending'],
      absentResults: batch?.absentResults,
      absentTimers: batch?.absentTimers,
      where: [{ sql: `phase in ('starting', 'preparing')` }, ...(batch?.where ?? [])],
      set: [{ sql: `status = 'running', phase = null, started_at = clock_timestamp()` }, ...(batch?.set ?? [])],
      events: [
        { type: 'run.preparing', data: { status: 'pending' } },
        { type: 'run.started', data: { status: 'running' } },
        ...(batch?.events ?? []),
      ],
    },
    `${STATE_COLUMNS}, workflow_id, displayed_price_usd, creator_price_usd`,
  );
}

function fundingArgs(runId: string, run: Record<string, unknown>) {
  return {
    id: runId,
    accountId: String(run.account_id),
    workflowId: String(run.workflow_id),
    versionId: String(run.version_id),
    displayedPriceUsd: String(run.displayed_price_usd),
  };
}

/** The general path: run.preparing, funding, then run.started or the terminal run.failed. */
async function prepareCarefully(deps: ActivityDeps, runId: string): Promise<PrepareResult> {
  let last: number | null = null;
  let failed: FinishedRun | null = null;
  const result = await fork(deps).transactional(async (tx): Promise<PrepareResult> => {
    const [run] = await tx.execute<Record<string, unknown>[]>(
      `select status, phase, account_id, workflow_id, version_id, displayed_price_usd from runs where id = ? for update`,
      [runId],
    );
    if (!run) throw new Error(`run ${runId} does not exist`);
    if (run.status !== 'pending' || run.phase === 'queued') return { status: run.status as RunStatus, started: false };
    const preparing = await fencedWrite(tx, runId, {
      statuses: ['pending'],
      set: [{ sql: `phase = 'preparing'` }],
      events: [{ type: 'run.preparing', data: { status: 'pending' } }],
    });
    if (preparing === null) return { status: 'pending', started: false };
    const funding = await fundRun(tx, fundingArgs(runId, run));
    if (!funding.ok) {
      failed = await finishRun(tx, runId, { status: 'failed', charge: 'none', reason: funding.reason });
      return { status: 'failed', started: false };
    }
    last = await fencedWrite(tx, runId, {
      statuses: ['pending'],
      set: [{ sql: `status = 'running', phase = null, started_at = clock_timestamp()` }],
      events: [{ type: 'run.started', data: { status: 'running' } }],
    });
    return { status: 'running', started: true };
  });
  if (result.status === 'failed') publishTerminal(deps, runId, failed);
  else publish(deps, runId, last);
  return result;
}

// ---------------------------------------------------------------------------------------------------
// State

const STATE_COLUMNS = `account_id, version_id, status, phase, suspend_reason, resume_at, credential_mode, inputs, progress,
  compute_usd, compute_limit_usd, step_usd, steps_executed, last_sequence`;

async function stateFromRow(em: Em, runId: string, r: Record<string, unknown>): Promise<RunState> {
  const versionId = String(r.version_id);
  remember(runMetaCache, runId, { versionId, accountId: String(r.account_id) });
  return {
    runId,
    accountId: String(r.account_id),
    versionId,
    status: r.status as RunStatus,
    phase: (r.phase as string | null) ?? null,
    suspendReason: (r.suspend_reason as RunState['suspendReason']) ?? null,
    resumeAt: dateOrNull(r.resume_at)?.getTime() ?? null,
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

export async function loadRunState(deps: ActivityDeps, runId: string): Promise<RunState | null> {
  const em = fork(deps);
  const [r] = await em.execute<Record<string, unknown>[]>(`select ${STATE_COLUMNS} from runs where id = ?`, [runId]);
  return r ? stateFromRow(em, runId, r) : null;
}

// ---------------------------------------------------------------------------------------------------
// Free actions (resolve, skip, timers)

/** The interpreter's actions other than `execute`. */
export type { FreeAction } from '../domain/graph/interpreter.ts';
import type { FreeAction } from '../domain/graph/interpreter.ts';
import { prepared } from '../db/prepared.ts';

export interface ApplyResult {
  /** False when the run is terminal (or gone): nothing was written. */
  applied: boolean;
  status: RunStatus | null;
}

function freeActionEffects(graph: Graph, actions: FreeAction[]) {
  const kinds = new Map(graph.nodes.map((n) => [n.id, n.kind]));
  const events: NewRunEvent[] = [];
  const results: Record<string, NodeResult> = {};
  const addTimers: Record<string, number> = {};
  const removeTimers: string[] = [];
  for (const a of actions) {
    const kind = kinds.get(a.nodeId);
    switch (a.type) {
      case 'resolve':
        results[a.nodeId] = { status: 'completed', value: a.value };
        // Inputs are recorded silently; conditions and outputs are reported.
        if (kind === 'condition' || kind === 'output') events.push({ type: 'node.completed', nodeId: a.nodeId });
        break;
      case 'skip':
        results[a.nodeId] = { status: 'skipped', reason: a.reason };
        events.push({ type: 'node.skipped', nodeId: a.nodeId, data: { reason: a.reason } });
        break;
      case 'start_timer':
        addTimers[a.nodeId] = a.dueAt;
        events.push({ type: 'node.started', nodeId: a.nodeId });
        break;
      case 'fire_timer':
        results[a.nodeId] = { status: 'completed', value: null };
        removeTimers.push(a.nodeId);
        events.push({ type: 'node.completed', nodeId: a.nodeId });
        break;
    }
  }
  return { events, results, addTimers, removeTimers };
}

/** Drops actions an earlier attempt already applied (a retry after a lost reply). */
function pendingActions(progress: RunProgress, actions: FreeAction[]): FreeAction[] {
  return actions.filter((a) => {
    if (a.type === 'start_timer') return !(a.nodeId in progress.timers) && !(a.nodeId in progress.results);
    return !(a.nodeId in progress.results);
  });
}

/** One statement, fenced on none of the actions being recorded yet: the common case. */
async function applyActionsFast(em: Em, runId: string, actions: FreeAction[]): Promise<number | null> {
  const meta = await runMeta(em, runId);
  if (!meta) return null;
  const fx = freeActionEffects(await graphOf(em, meta.versionId), actions);
  return fencedWrite(em, runId, {
    statuses: ['running', 'suspended'],
    absentResults: actions.map((a) => a.nodeId),
    absentTimers: actions.filter((a) => a.type === 'start_timer').map((a) => a.nodeId),
    set: [progressSet({ results: fx.results, addTimers: fx.addTimers, removeTimers: fx.removeTimers })],
    events: fx.events,
  });
}

/** Under the run row lock: drops what an earlier attempt already recorded, records the rest. */
async function applyActionsLocked(tx: Em, runId: string, actions: FreeAction[]): Promise<{ last: number | null; status: RunStatus | null }> {
  const run = await readRun(tx, runId, true);
  if (!run) return { last: null, status: null };
  if (isTerminal(run.status) || run.status === 'pending') return { last: null, status: run.status };
  const todo = pendingActions(run.progress, actions);
  if (todo.length === 0) return { last: 0, status: run.status };
  const fx = freeActionEffects(await graphOf(tx, run.versionId), todo);
  const last = await fencedWrite(tx, runId, {
    statuses: ['running', 'suspended'],
    set: [progressSet({ results: fx.results, addTimers: fx.addTimers, removeTimers: fx.removeTimers })],
    events: fx.events,
  });
  return { last, status: run.status };
}

async function applyActionsIn(em: Em, runId: string, actions: FreeAction[], inTransaction: boolean): Promise<{ last: number | null; status: RunStatus | null }> {
  const free = actions.filter((a) => (a as Action).type !== 'execute');
  if (free.length === 0) return { last: 0, status: null };
  const fast = await applyActionsFast(em, runId, free);
  if (fast !== null) return { last: fast, status: null };
  return inTransaction ? applyActionsLocked(em, runId, free) : em.transactional((tx) => applyActionsLocked(tx, runId, free));
}

/**
 * Records the interpreter's free actions in one statement: results of resolved and skipped nodes,
 * started and fired timers, with their events (`node.skipped`, `node.completed` for conditions, outputs
 * and fired delays, `node.started` for a started delay). Fenced on a non-terminal run; actions already
 * recorded (a retry) are ignored.
 */
export async function applyActions(deps: ActivityDeps, runId: string, actions: FreeAction[]): Promise<ApplyResult> {
  const r = await applyActionsIn(fork(deps), runId, actions, false);
  publish(deps, runId, r.last);
  return { applied: r.last !== null, status: r.status };
}

// ---------------------------------------------------------------------------------------------------
// Suspend / resume

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
  const [r] = await em.execute<{ status: RunStatus }[]>('select status from runs where id = ?', [runId]);
  return r?.status ?? null;
}

/** running → suspended (`run.suspended` with the reason). A run already suspended is left as it is. */
export async function suspendRun(deps: ActivityDeps, runId: string, args: SuspendArgs): Promise<TransitionResult> {
  const em = fork(deps);
  const last = await fencedWrite(em, runId, {
    statuses: ['running'],
    set: [{ sql: `status = 'suspended', suspend_reason = ?`, params: [args.reason] }, timestampFromMs(args.resumeAt)],
    events: [{ type: 'run.suspended', data: { status: 'suspended', reason: args.reason } }],
  });
  publish(deps, runId, last);
  return { changed: last !== null, status: last !== null ? 'suspended' : await currentStatus(em, runId) };
}

/**
 * suspended → running (`run.resumed`). With `reason`, only a run suspended for that reason resumes
 * (credentials resume a wait_signal run, never a timer). A run already running is left as it is.
 */
export async function resumeRun(deps: ActivityDeps, runId: string, opts: { reason?: 'wait_timer' | 'wait_signal' } = {}): Promise<TransitionResult> {
  const em = fork(deps);
  const last = await fencedWrite(em, runId, {
    statuses: ['suspended'],
    where: opts.reason ? [{ sql: 'suspend_reason = ?', params: [opts.reason] }] : [],
    set: [{ sql: `status = 'running', suspend_reason = null, resume_at = null` }],
    events: [{ type: 'run.resumed', data: { status: 'running' } }],
  });
  publish(deps, runId, last);
  return { changed: last !== null, status: last !== null ? 'running' : await currentStatus(em, runId) };
}

// ---------------------------------------------------------------------------------------------------
// Completion

export function chargeFor(finished: Finished): Finish['charge'] {
  if (finished.status === 'completed' && finished.outcome === 'completed') return 'full';
  return 'compute';
}

/**
 * Ends the run as the interpreter decided (finishRun: settlement, terminal event, webhooks, secrets
 * deleted). `actions` are the plan's last free actions, applied in the same transaction, and so is
 * `batch` (in-memory steps not written yet, see recordBatch): one fenced statement for both. Returns
 * false when the run was already terminal; when the batch was refused it is recorded entry by entry
 * instead (recordBatch's fallback) and the run is left for the caller to look at again.
 *
 * `start`: the run is still an admitted pending run that the caller computed entirely in memory, so it
 * is started, its steps recorded, funded and finished in this one transaction (one commit and one
 * wallet lock instead of preparation's and completion's). When it cannot start here (not admitted any
 * more, or funds are insufficient) nothing is written and `completed` is false: prepareRun decides then.
 */
export async function completeRun(
  deps: ActivityDeps,
  runId: string,
  finished: Finished,
  actions: FreeAction[] = [],
  batch?: StepBatch,
  opts: { start?: boolean } = {},
): Promise<{ completed: boolean }> {
  const entries = batch?.entries.length || (opts.start && actions.length) ? [...(batch?.entries ?? []), ...(actions.length ? [{ actions }] : [])] : null;
  const finish: Finish = {
    status: finished.status,
    outcome: finished.outcome,
    reason: finished.reason,
    outputs: finished.outputs,
    charge: chargeFor(finished),
  };
  let refused = false;
  let done: FinishedRun | null;
  try {
    done = await fork(deps).transactional((tx) => complete(tx));
  } catch (error) {
    if (error instanceof NotStartedHere || error instanceof InsufficientFundsAtSettlement) return { completed: false };
    throw error;
  }
  if (refused && batch) await recordEntries(deps, runId, batch);
  publishTerminal(deps, runId, done);
  return { completed: done !== null };

  async function complete(tx: Em): Promise<FinishedRun | null> {
    if (opts.start) return startAndFinish(tx);
    if (entries) {
      const written = await writeBatch(tx, runId, entries);
      if (written === null) {
        refused = true;
        return null;
      }
    } else if (actions.length) {
      const applied = await applyActionsIn(tx, runId, actions, true);
      if (applied.last === null) return null;
    }
    return finishRun(tx, runId, finish, { commit: true });
  }

  /**
   * Started here: the start and the batch in one statement, then the funding (a bundle pays now, a
   * wallet hold is taken by the settlement, the last statement, so the account's wallet row is locked
   * for one statement and the commit), then the finish, which needs no re-read of the locked run.
   */
  async function startAndFinish(tx: Em): Promise<FinishedRun | null> {
    const run = await startAdmitted(tx, runId, entries ?? []);
    if (!run) throw new NotStartedHere();
    const funding = await fundRunAtSettlement(tx, fundingArgs(runId, run));
    const locked: LockedRun = {
      accountId: String(run.account_id),
      status: 'running',
      funding: funding.funding,
      bundleId: funding.bundleId,
      bundleUsdPerRun: funding.bundleUsdPerRun,
      holdUsd: funding.holdUsd,
      computeUsd: String(run.compute_usd),
      creatorPriceUsd: String(run.creator_price_usd),
      workflowId: String(run.workflow_id),
    };
    return finishRun(tx, runId, finish, { holdAtSettlement: funding.funding === 'wallet', locked, commit: true });
  }
}

/** Rolls back a start-and-complete transaction: the run is left to prepareRun. */
class NotStartedHere extends Error {}

/** Ends a run as failed with a reason (compute charged), e.g. a graph that cannot make progress. */
export async function failRun(deps: ActivityDeps, runId: string, reason: string): Promise<{ failed: boolean }> {
  const finished = await fork(deps).transactional((tx) => finishRun(tx, runId, { status: 'failed', charge: 'compute', reason }, { commit: true }));
  publishTerminal(deps, runId, finished);
  return { failed: finished !== null };
}

// ---------------------------------------------------------------------------------------------------
// Steps

export interface StepArgs {
  runId: string;
  nodeId: string;
  /**
   * Optional: the results the caller already knows (the embedded engine's in-memory state, which is
   * what it recorded). Results never change once recorded, so a text.template / json.parse step can
   * render from them and skip reading the run; the write stays fenced in SQL.
   */
  known?: { results: Record<string, NodeResult>; inputs: Record<string, JsonValue> };
}

export type StepOutcome =
  /** The node's result is recorded (by this call or an earlier attempt). */
  | { type: 'recorded'; result: NodeResult }
  /** BYOK without usable credentials: the run is suspended with wait_signal; the node is not recorded. */
  | { type: 'suspended'; reason: 'wait_signal' }
  /** The step did not (or no longer may) run: the run is terminal (cancelled, compute limit…) or not running. */
  | { type: 'not_runnable'; status: RunStatus | null };

/** Thrown into the activity when the run ended while the step streamed. */
class RunNotWritable extends Error {
  constructor() {
    super('the run is no longer running');
    this.name = 'RunNotWritable';
  }
}

/** Splits text into a few chunks (about 64 characters, at most 32, cut after a space when possible). */
export function chunkText(text: string, size = 64, maxChunks = 32): string[] {
  if (!text) return [];
  // A cut at a space keeps at least half a target, so twice the even share bounds the count.
  const target = Math.max(size, Math.ceil((2 * text.length) / maxChunks));
  const chunks: string[] = [];
  for (let i = 0; i < text.length; ) {
    let end = Math.min(text.length, i + target);
    if (end < text.length) {
      const space = text.lastIndexOf(' ', end - 1);
      if (space >= i + target / 2) end = space + 1;
      const code = text.charCodeAt(end - 1);
      if (code >= 0xd800 && code <= 0xdbff) end++; // never split a surrogate pair
    }
    chunks.push(text.slice(i, end));
    i = end;
  }
  return chunks;
}

/**
 * Upstream values for templates: completed results, then (for input nodes, which an engine may resolve
 * without recording them) the run's inputs, and for password inputs the decrypted secret.
 */
function valueLookup(graph: Graph, results: Record<string, NodeResult>, inputs: Record<string, JsonValue>, secrets?: Map<string, string>) {
  const inputIds = new Set(graph.nodes.filter((n) => isInputKind(n.kind)).map((n) => n.id));
  return (nodeId: string): JsonValue | undefined => {
    if (secrets?.has(nodeId)) return secrets.get(nodeId)!;
    const r = results[nodeId];
    if (r) return r.status === 'completed' ? (r.value ?? null) : undefined;
    return inputIds.has(nodeId) ? (inputs[nodeId] ?? null) : undefined;
  };
}

/** text.template and json.parse: pure functions of upstream values. */
function executeSync(
  node: GraphNode,
  lookup: (nodeId: string) => JsonValue | undefined,
): { outcome: NodeOutcome; deltas: string[] } {
  if (node.kind === 'text.template') {
    const text = renderTemplate(typeof node.template === 'string' ? node.template : '', lookup);
    return { outcome: { status: 'completed', value: text }, deltas: chunkText(text) };
  }
  if (node.kind === 'json.parse') {
    const from = typeof node.from === 'string' ? parseFrom(node.from) : { node: '', path: [] };
    const source = readPath(lookup(from.node), from.path);
    if (typeof source !== 'string') {
      if (source === undefined) return { outcome: { status: 'failed', reason: `invalid JSON in ${node.id}` }, deltas: [] };
      return { outcome: { status: 'completed', value: source }, deltas: [] };
    }
    try {
      return { outcome: { status: 'completed', value: JSON.parse(source) as JsonValue }, deltas: [] };
    } catch {
      return { outcome: { status: 'failed', reason: `invalid JSON in ${node.id}` }, deltas: [] };
    }
  }
  throw new Error(`${node.kind} is not a synchronous step`);
}

async function usageCost(em: Em, credentialMode: string, usage: LlmUsage | undefined): Promise<Usd> {
  if (!usage || credentialMode === 'byok') return ZERO;
  const price = (await getPricing(em)).models[usage.model];
  if (!price) return ZERO;
  return usd(usage.inputTokens).times(usd(price.input)).plus(usd(usage.outputTokens).times(usd(price.output))).dividedBy(1_000_000);
}

function resultOf(outcome: Extract<NodeOutcome, { status: 'completed' | 'failed' }>): NodeResult {
  return outcome.status === 'completed' ? { status: 'completed', value: outcome.value } : { status: 'failed', reason: outcome.reason };
}

function resultEvent(nodeId: string, result: NodeResult): NewRunEvent {
  return result.status === 'completed'
    ? { type: 'node.completed', nodeId }
    : { type: 'node.failed', nodeId, data: { reason: result.status === 'failed' ? result.reason : 'failed' } };
}

/**
 * Executes one step node. The compute limit is checked first: when the run's compute plus one step
 * would exceed its limit, the step does not start (no `node.started`) and the run fails, charged the
 * compute used. Otherwise: `node.started`, the node's work (deltas streamed as `node.output.delta`),
 * then the result, its compute (one step plus service-hosted LLM usage) and `node.completed` /
 * `node.failed` in one statement fenced on the run not being terminal and the node having no result.
 * A node that already has a result is returned as it is, without running again. `signal` aborts the
 * node's I/O; the call then throws.
 */
export async function executeStep(deps: ActivityDeps, args: StepArgs, signal?: AbortSignal): Promise<StepOutcome> {
  const { runId, nodeId } = args;
  const em = fork(deps);
  if (args.known) {
    const meta = await runMeta(em, runId);
    if (!meta) return { type: 'not_runnable', status: null };
    const graph = await graphOf(em, meta.versionId);
    const node = graph.nodes.find((n) => n.id === nodeId);
    if (node && (node.kind === 'text.template' || node.kind === 'json.parse')) {
      return executeSyncStep(deps, em, runId, graph, node, args.known.results, args.known.inputs, signal);
    }
  }
  const run = await readRun(em, runId);
  if (!run) return { type: 'not_runnable', status: null };
  const existing = run.progress.results[nodeId];
  if (existing) return { type: 'recorded', result: existing };
  if (run.status !== 'running') return { type: 'not_runnable', status: run.status };
  const graph = await graphOf(em, run.versionId);
  const node = graph.nodes.find((n) => n.id === nodeId);
  if (!node || !isStepKind(node.kind)) throw new Error(`node ${nodeId} is not a step of run ${runId}`);
  if (overComputeLimit(run)) return failForComputeLimit(deps, runId, nodeId);
  if (node.kind === 'text.template' || node.kind === 'json.parse') {
    return executeSyncStep(deps, em, runId, graph, node, run.progress.results, run.inputs, signal);
  }
  return executeAsync(deps, em, runId, run, graph, node, signal ?? new AbortController().signal);
}

/**
 * text.template / json.parse: computed in memory, then node.started, the deltas, the result and the
 * step's compute in ONE statement, fenced on the run running, the node having no result and the
 * compute limit (else nothing is written and the reason is looked up).
 */
async function executeSyncStep(
  deps: ActivityDeps,
  em: Em,
  runId: string,
  graph: Graph,
  node: GraphNode,
  results: Record<string, NodeResult>,
  inputs: Record<string, JsonValue>,
  signal: AbortSignal | undefined,
): Promise<StepOutcome> {
  signal?.throwIfAborted();
  const nodeId = node.id;
  const { result, deltas } = computeSyncStep(graph, node, results, inputs);
  const events = syncStepEvents(nodeId, result, deltas);
  const last = await fencedWrite(em, runId, {
    statuses: ['running'],
    absentResults: [nodeId],
    withinComputeLimit: true,
    set: recordSets(nodeId, result, result.status === 'completed' ? 'step' : null),
    events,
  });
  if (last !== null) {
    publish(deps, runId, last);
    return { type: 'recorded', result };
  }
  return explainRefusal(deps, runId, nodeId);
}

/** The events of a text.template / json.parse step: started, its deltas, completed or failed. */
function syncStepEvents(nodeId: string, result: NodeResult, deltas: string[]): NewRunEvent[] {
  return [
    { type: 'node.started', nodeId },
    ...deltas.map((text) => ({ type: 'node.output.delta', nodeId, data: { text } })),
    resultEvent(nodeId, result),
  ];
}

/** Steps a driver may batch (src/engine/run-driver.ts decides). */
export { isInMemoryStep } from './run-driver.ts';

/** Computes a text.template / json.parse step from known upstream results; no I/O. */
export function computeSyncStep(
  graph: Graph,
  node: GraphNode,
  results: Record<string, NodeResult>,
  inputs: Record<string, JsonValue>,
): { result: NodeResult; deltas: string[] } {
  const { outcome, deltas } = executeSync(node, valueLookup(graph, results, inputs));
  return { result: resultOf(outcome as Extract<NodeOutcome, { status: 'completed' | 'failed' }>), deltas };
}

// ---------------------------------------------------------------------------------------------------
// Batched in-memory steps

/** In-memory work not written yet (built by the driver, src/engine/run-driver.ts). */
import type { BatchEntry, StepBatch } from './run-driver.ts';
export type { BatchEntry, StepBatch };

/**
 * The batch as ONE fenced write: every node in it must have no result yet (and no started timer), the run
 * must be running, and the compute limit must hold at each step as it would step by step. Compute grows
 * only with completed steps, so the last step's check is the binding one: compute + (completed steps
 * before it + 1) × step_usd ≤ limit. Returns the new last sequence, or null when the fence did not hold.
 */
async function writeBatch(em: Em, runId: string, entries: BatchEntry[]): Promise<number | null> {
  const w = await batchWrite(em, runId, entries);
  return w ? fencedWrite(em, runId, w) : null;
}

/** The batch's fenced write (fenced on the run running; startAdmitted fences it on the admitted run instead). */
async function batchWrite(em: Em, runId: string, entries: BatchEntry[]): Promise<FencedWrite | null> {
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
  const set: { sql: string; params?: unknown[] }[] = [progressSet({ results, addTimers, removeTimers })];
  if (completed > 0) set.push({ sql: `compute_usd = compute_usd + ${completed} * step_usd, steps_executed = steps_executed + ${completed}` });
  return {
    statuses: ['running'],
    absentResults,
    absentTimers,
    where: limitSteps > 0 ? [{ sql: `compute_usd + ${limitSteps} * step_usd <= compute_limit_usd` }] : [],
    set,
    events,
  };
}

/**
 * Records a batch of in-memory steps in one statement. When its fence does not hold (the run ended or
 * was cancelled, a step would pass the compute limit, an entry was recorded by someone else), the
 * entries are recorded one by one through the step-by-step activities instead, which decide each case
 * exactly as if there had been no batch. Returns true when every entry was recorded.
 */
export async function recordBatch(deps: ActivityDeps, runId: string, batch: StepBatch): Promise<{ recorded: boolean }> {
  if (batch.entries.length === 0) return { recorded: true };
  const last = await writeBatch(fork(deps), runId, batch.entries);
  if (last !== null) {
    publish(deps, runId, last);
    return { recorded: true };
  }
  return { recorded: await recordEntries(deps, runId, batch) };
}

async function recordEntries(deps: ActivityDeps, runId: string, batch: StepBatch): Promise<boolean> {
  for (const e of batch.entries) {
    if ('step' in e) {
      const outcome = await executeStep(deps, { runId, nodeId: e.step, known: batch.known });
      if (outcome.type !== 'recorded') return false;
    } else {
      const applied = await applyActions(deps, runId, e.actions);
      if (!applied.applied) return false;
    }
  }
  return true;
}

/** The result into progress and, for a completed step, one step_usd plus `extra` (LLM usage) into compute. */
function recordSets(nodeId: string, result: NodeResult, compute: 'step' | { extra: Usd } | null) {
  const sets: { sql: string; params?: unknown[] }[] = [progressSet({ results: { [nodeId]: result } })];
  if (compute === 'step') sets.push({ sql: 'compute_usd = compute_usd + step_usd, steps_executed = steps_executed + 1' });
  else if (compute) {
    sets.push({ sql: 'compute_usd = compute_usd + step_usd + ?::numeric, steps_executed = steps_executed + 1', params: [compute.extra.toFixed()] });
  }
  return sets;
}

/** Why a fenced step write did not happen: result already there, run not running, or the compute limit. */
async function explainRefusal(deps: ActivityDeps, runId: string, nodeId: string): Promise<StepOutcome> {
  const run = await readRun(fork(deps), runId);
  if (!run) return { type: 'not_runnable', status: null };
  const existing = run.progress.results[nodeId];
  if (existing) return { type: 'recorded', result: existing };
  if (run.status === 'running' && overComputeLimit(run)) return failForComputeLimit(deps, runId, nodeId);
  return { type: 'not_runnable', status: run.status };
}

async function failForComputeLimit(deps: ActivityDeps, runId: string, nodeId: string): Promise<StepOutcome> {
  const finished = await fork(deps).transactional(async (tx) => {
    const run = await readRun(tx, runId, true);
    if (!run || isTerminal(run.status) || run.progress.results[nodeId] || !overComputeLimit(run)) return null;
    return finishRun(tx, runId, { status: 'failed', charge: 'compute', reason: COMPUTE_LIMIT_REASON }, { commit: true });
  });
  publishTerminal(deps, runId, finished);
  if (finished === null) return explainRefusalAfterLimit(deps, runId, nodeId);
  return { type: 'not_runnable', status: 'failed' };
}

async function explainRefusalAfterLimit(deps: ActivityDeps, runId: string, nodeId: string): Promise<StepOutcome> {
  const run = await readRun(fork(deps), runId);
  if (!run) return { type: 'not_runnable', status: null };
  const existing = run.progress.results[nodeId];
  if (existing) return { type: 'recorded', result: existing };
  return { type: 'not_runnable', status: run.status };
}

/**
 * Buffers a step's output chunks and writes them as `node.output.delta` events in small fenced
 * transactions (every DELTA_FLUSH_MS or DELTA_FLUSH_CHUNKS chunks), one flush at a time, in order.
 * `skip` characters already published by an earlier attempt of the step are not published again.
 */
class DeltaSink {
  #buffer: string[] = [];
  #chain: Promise<void> = Promise.resolve();
  #timer: NodeJS.Timeout | undefined;
  #error: unknown;
  #skip: number;

  constructor(
    private readonly deps: ActivityDeps,
    private readonly runId: string,
    private readonly nodeId: string,
    skip: number,
  ) {
    this.#skip = skip;
  }

  push = async (text: string): Promise<void> => {
    if (this.#error) throw this.#error;
    if (this.#skip > 0) {
      const cut = Math.min(this.#skip, text.length);
      this.#skip -= cut;
      text = text.slice(cut);
    }
    if (!text) return;
    this.#buffer.push(text);
    if (this.#buffer.length >= DELTA_FLUSH_CHUNKS) await this.flush();
    else this.#timer ??= setTimeout(() => void this.flush().catch(() => undefined), DELTA_FLUSH_MS);
  };

  flush(): Promise<void> {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    const batch = this.#buffer.splice(0);
    if (batch.length === 0) return this.#chain;
    this.#chain = this.#chain.then(async () => {
      if (this.#error) return;
      try {
        const last = await fencedWrite(fork(this.deps), this.runId, {
          statuses: ['running', 'suspended'],
          absentResults: [this.nodeId],
          events: batch.map((text) => ({ type: 'node.output.delta', nodeId: this.nodeId, data: { text } })),
        });
        if (last === null) throw new RunNotWritable();
        publish(this.deps, this.runId, last);
      } catch (error) {
        this.#error = error;
        throw error;
      }
    });
    return this.#chain;
  }

  /** Waits for flushes in progress and hands back what is still buffered (written with the result). */
  async drain(): Promise<NewRunEvent[]> {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#chain.catch(() => undefined);
    if (this.#error) throw this.#error;
    return this.#buffer.splice(0).map((text) => ({ type: 'node.output.delta', nodeId: this.nodeId, data: { text } }));
  }

  /** Stops flushing (abort): waits for a flush in progress, drops the rest. */
  async close(): Promise<void> {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#buffer = [];
    await this.#chain.catch(() => undefined);
  }
}

/** llm.chat and http.request: I/O outside any transaction, streamed deltas, then the result. */
async function executeAsync(
  deps: ActivityDeps,
  em: Em,
  runId: string,
  run: RunRowLite,
  graph: Graph,
  node: GraphNode,
  signal: AbortSignal,
  attempt = 0,
): Promise<StepOutcome> {
  const nodeId = node.id;
  // A re-execution (after a crash or a wait_signal) continues the node's log instead of repeating it.
  const prior = await em.execute<{ type: string; data: unknown }[]>(
    `select type, data from run_events where run_id = ? and node_id = ? and type in ('node.started', 'node.output.delta') order by sequence`,
    [runId, nodeId],
  );
  const startedBefore = prior.some((e) => e.type === 'node.started');
  const published = prior
    .filter((e) => e.type === 'node.output.delta')
    .reduce((n, e) => n + String(json<{ text?: string }>(e.data)?.text ?? '').length, 0);

  if (!startedBefore) {
    const last = await fencedWrite(em, runId, {
      statuses: ['running'],
      absentResults: [nodeId],
      withinComputeLimit: true,
      events: [{ type: 'node.started', nodeId }],
    });
    if (last === null) return explainRefusal(deps, runId, nodeId);
    publish(deps, runId, last);
  }

  const ctx = await executionContext(deps, em, runId, run, graph, node, signal);
  const sink = new DeltaSink(deps, runId, nodeId, published);
  ctx.onDelta = sink.push;
  let outcome: NodeOutcome;
  try {
    outcome = node.kind === 'llm.chat' ? await executeLlmChat(ctx) : await executeHttpRequest(ctx);
  } catch (error) {
    await sink.close();
    if (error instanceof RunNotWritable) return explainRefusal(deps, runId, nodeId);
    if (signal.aborted) throw error;
    deps.log.error({ err: error, runId, nodeId }, 'a step failed unexpectedly');
    outcome = { status: 'failed', reason: 'the step failed unexpectedly' };
  }
  let leftover: NewRunEvent[];
  try {
    leftover = await sink.drain();
  } catch (error) {
    if (error instanceof RunNotWritable) return explainRefusal(deps, runId, nodeId);
    throw error;
  }
  signal.throwIfAborted();

  if (outcome.status === 'needs_credentials') {
    // Fenced on no credentials for this provider having been supplied meanwhile (they would otherwise
    // arrive before the suspension and never resume it).
    const last = await fencedWrite(em, runId, {
      statuses: ['running'],
      absentResults: [nodeId],
      where: [
        {
          sql: `not exists (select 1 from run_secrets s where s.run_id = runs.id and s.kind = 'provider_credential' and s.name = ?)`,
          params: [outcome.provider],
        },
      ],
      set: [{ sql: `status = 'suspended', suspend_reason = 'wait_signal', resume_at = null` }],
      events: [...leftover, { type: 'run.suspended', data: { status: 'suspended', reason: 'wait_signal' } }],
    });
    if (last !== null) {
      publish(deps, runId, last);
      return { type: 'suspended', reason: 'wait_signal' };
    }
    const now = await readRun(em, runId);
    if (now?.status === 'suspended') return { type: 'suspended', reason: 'wait_signal' };
    if (now?.status === 'running' && !now.progress.results[nodeId] && attempt === 0 && (await hasSuppliedCredential(em, runId, outcome.provider))) {
      return executeAsync(deps, em, runId, now, graph, node, signal, attempt + 1);
    }
    return explainRefusal(deps, runId, nodeId);
  }

  const result = resultOf(outcome);
  const compute =
    result.status === 'completed' ? { extra: await usageCost(em, run.credentialMode, outcome.status === 'completed' ? outcome.usage : undefined) } : null;
  const last = await fencedWrite(em, runId, {
    statuses: ['running', 'suspended'],
    absentResults: [nodeId],
    set: recordSets(nodeId, result, compute),
    events: [...leftover, resultEvent(nodeId, result)],
  });
  if (last === null) return explainRefusal(deps, runId, nodeId);
  publish(deps, runId, last);
  return { type: 'recorded', result };
}

async function hasSuppliedCredential(em: Em, runId: string, provider: string): Promise<boolean> {
  const rows = await em.execute<{ name: string }[]>(
    `select name from run_secrets where run_id = ? and kind = 'provider_credential' and name = ?`,
    [runId, provider],
  );
  return rows.length > 0;
}

/**
 * For a run suspended with wait_signal: are there supplied credentials for a provider that one of its
 * unfinished llm.chat nodes needs? (Then the run can resume, e.g. after the signal was missed.)
 */
export async function credentialsAvailable(deps: ActivityDeps, runId: string): Promise<boolean> {
  const em = fork(deps);
  const run = await readRun(em, runId);
  if (!run) return false;
  const graph = await graphOf(em, run.versionId);
  const wanted = new Set(
    graph.nodes.filter((n) => n.kind === 'llm.chat' && !run.progress.results[n.id]).map((n) => (n.kind === 'llm.chat' ? n.provider : '')),
  );
  if (wanted.size === 0) return false;
  const rows = await em.execute<{ name: string }[]>(`select name from run_secrets where run_id = ? and kind = 'provider_credential'`, [runId]);
  return rows.some((r) => wanted.has(r.name as Provider));
}

/** The context an llm.chat / http.request activity runs with: rendering with secrets, BYOK key. */
async function executionContext(
  deps: ActivityDeps,
  em: Em,
  runId: string,
  run: RunRowLite,
  graph: Graph,
  node: GraphNode,
  signal: AbortSignal,
): Promise<NodeExecutionContext> {
  const secrets = await em.execute<{ kind: string; name: string; ciphertext: string }[]>(
    'select kind, name, ciphertext from run_secrets where run_id = ?',
    [runId],
  );
  const passwordIds = new Set(graph.nodes.filter((n) => n.kind === 'input.password').map((n) => n.id));
  const passwords = new Map<string, string>();
  let byokKey: string | undefined;
  const provider = node.kind === 'llm.chat' ? (node.provider as Provider) : undefined;
  for (const s of secrets) {
    if (s.kind === 'password_input' && passwordIds.has(s.name)) passwords.set(s.name, deps.sealer.open(s.ciphertext));
    if (s.kind === 'provider_credential' && provider && s.name === provider) byokKey = deps.sealer.open(s.ciphertext);
  }
  for (const id of passwordIds) if (!passwords.has(id)) passwords.set(id, '');
  if (provider && run.credentialMode === 'byok' && byokKey === undefined) {
    const [stored] = await em.execute<{ ciphertext: string }[]>('select ciphertext from provider_keys where account_id = ? and provider = ?', [
      run.accountId,
      provider,
    ]);
    if (stored) byokKey = deps.sealer.open(stored.ciphertext);
  }
  const lookup = valueLookup(graph, run.progress.results, run.inputs, passwords);
  return {
    runId,
    node,
    render: (template: string) => renderTemplate(template, lookup),
    credentialMode: run.credentialMode,
    byokKey,
    providers: deps.config.providers,
    allowPrivateNetwork: deps.config.allowPrivateNetwork,
    onDelta: () => undefined,
    signal,
  };
}
