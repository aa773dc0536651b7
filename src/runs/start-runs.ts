import { randomUUID } from 'node:crypto';
import { canonicalJson } from '../domain/canonical-json.ts';
import { ApiError, invalidRequest, notFound } from '../domain/errors.ts';
import { isUuid } from '../domain/ids.ts';
import { jsonLimitProblem } from '../domain/json-limits.ts';
import { checkMetadata, type RunMetadata } from '../domain/run-metadata.ts';
import { readStartAt, startInstant } from '../domain/run-start.ts';
import { readDebounce, type RunDebounce } from '../domain/run-debounce.ts';
import { startDebounced, type DebouncedAnswer } from './debounce-runs.ts';
import { checkFlowControl, type RunFlowControl } from '../domain/run-flow-control.ts';
import { outsideTransaction, type StatementEm, type TransactionAwareEm } from '../db/statement.ts';
import { runAccepted } from '../observability/metrics.ts';
import type { Principal } from '../domain/principal.ts';
import type { Deps } from './deps.ts';
import { findWorkflowToRun } from '../catalog/workflow-access.ts';
import { acceptRuns, idempotencyConflict, spendCapReached, type AcceptCall, type Acceptance } from './accept-run.ts';
import { batchItemKey, underBatchKey, type BatchKey } from './batch-key.ts';
import { quoteRuns, type RunQuote } from './quote-runs.ts';
import { checkRun, pickIdempotencyKey, type CheckMemo } from './check-run.ts';
import { runUrls, type AcceptedRun } from './run-views.ts';
import { workflowReadCache, type KeptRead } from './workflow-cache.ts';

/**
 * The one start path: POST /runs is a set of one, POST /runs/batch a set of up to MAX_BATCH_RUNS
 * (docs/design/batch-runs.md). Each item is parsed and checked by the same code (check-run.ts) and
 * refused with the error POST /runs answers for the same body; the items that pass are accepted by one
 * statement (accept-run.ts) in index order, which is the queue's order and the order the spend cap is
 * taken in. Counting the request in its key's windows is the caller's (counted-start.ts), before this.
 *
 * The workflow read is kept a short while (workflow-cache.ts): a set whose workflows were read recently
 * sends only the acceptance, fenced on the kept read's view token; a refusal is never decided from a
 * kept read, and an item whose workflow changed since its read is read and checked again (the last try
 * unfenced).
 */

export const MAX_BATCH_RUNS = 1000;
/** Reads of a workflow one set may make when it keeps changing under it (the last is not fenced). */
const MAX_READS = 3;

export interface StartRunsOptions {
  /** The Cancel-After duration of every run (src/domain/run-deadline.ts), or null. */
  cancelAfterSeconds: number | null;
  /** The Start-After delay of every run (src/domain/run-start.ts), or null/absent: an item's `startAt`, else at once. */
  startAfterSeconds?: number | null;
  /** POST /runs: its Idempotency-Key header, the key of its one item. */
  itemKeyHeader?: string;
  /** POST /runs/batch: the batch's Idempotency-Key and the fingerprint of its body. */
  batch?: BatchKey | null;
  /** Replays (replay-run.ts): the run each item replays, by index, written with the item's run. */
  replayOf?: readonly (string | undefined)[];
}

/** An item's outcome; `debounced`: it joined a waiting run of its debounce key (debounce-runs.ts). */
export type RunOutcome = { index: number; run: AcceptedRun; replayed: boolean; debounced?: boolean } | { index: number; error: ApiError };

/** One item, parsed: what its check needs. */
interface Item {
  index: number;
  workflowId: string;
  /** Its own idempotency key, or the one the batch's key gives it, or null. */
  key: string | null;
  ownKey: boolean;
  requestedVersion: string | null;
  metadata: RunMetadata;
  flow: RunFlowControl;
  inputs: unknown;
  /** Its delayed start (epoch ms), or null: queued at once. */
  startAt: number | null;
  /** Its debounce (src/domain/run-debounce.ts), or null. */
  debounce: RunDebounce | null;
}

/** Starts the runs `bodies` (each what POST /runs takes) and answers each one's outcome, in order. */
export async function startRuns(deps: Deps, principal: Principal, bodies: readonly unknown[], opts: StartRunsOptions): Promise<RunOutcome[]> {
  const outcomes = new Array<RunOutcome>(bodies.length);
  const refuse = refuser(outcomes);
  let items = parseItems(deps, principal, bodies, opts, refuse);
  // Only statements outside a transaction (the acceptance opens its own): no fork, no entity manager to build.
  const em = outsideTransaction(deps.orm);
  const memo: CheckMemo = {};
  const accepted: string[] = [];
  const { batch } = opts;
  const accept: Accept = batch
    ? (calls) => underBatchKey(deps, principal, batch, bodies.length, (tx) => acceptRuns(tx, deps, calls))
    : (calls) => acceptRuns(em, deps, calls);
  for (let attempt = 1; items.length > 0; attempt++) {
    const calls = await checkItems(em, deps, principal, items, opts, memo, attempt, refuse);
    items = await acceptItems(accept, deps, principal, calls, attempt < MAX_READS, outcomes, accepted);
  }
  await told(deps, principal.accountId, accepted);
  return outcomes;
}

export type QuoteOutcome = { index: number; quote: RunQuote } | { index: number; error: ApiError };

/** `?dryRun=true`: each item's quote or refusal (the spend cap's included) by the same checks; nothing written. */
export async function quoteStartRuns(
  deps: Deps,
  principal: Principal,
  bodies: readonly unknown[],
  opts: StartRunsOptions,
): Promise<{ outcomes: QuoteOutcome[]; totalUsd: number }> {
  const outcomes = new Array<QuoteOutcome>(bodies.length);
  const refuse = refuser(outcomes);
  const em = outsideTransaction(deps.orm);
  const calls = await checkItems(em, deps, principal, parseItems(deps, principal, bodies, opts, refuse), opts, {}, 1, refuse);
  const { quotes, overCap, totalUsd } = await quoteRuns(em, principal, calls);
  calls.forEach(({ item }, i) => {
    outcomes[item.index] = overCap.has(i) ? { index: item.index, error: spendCapReached(principal.spendCap!) } : { index: item.index, quote: quotes[i] };
  });
  return { outcomes, totalUsd };
}

/** Records an item's refusal (an ApiError; anything else is the request's failure). */
const refuser =
  (outcomes: { index: number; error: ApiError }[] | RunOutcome[] | QuoteOutcome[]) =>
  (index: number, err: unknown): void => {
    if (!(err instanceof ApiError)) throw err;
    outcomes[index] = { index, error: err };
  };

function parseItems(
  deps: Deps,
  principal: Principal,
  bodies: readonly unknown[],
  opts: StartRunsOptions,
  refuse: (index: number, err: unknown) => void,
): Item[] {
  const items: Item[] = [];
  bodies.forEach((body, index) => {
    try {
      items.push(parseItem(deps, principal, body, index, opts));
    } catch (err) {
      refuse(index, err);
    }
  });
  return items;
}

/** The body checks of POST /runs, in its order, before any read. */
function parseItem(deps: Deps, principal: Principal, body: unknown, index: number, opts: StartRunsOptions): Item {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw invalidRequest('the request body must be a JSON object');
  // Before anything recursive or any database write sees it (deep nesting, NUL, lone surrogates).
  const problem = jsonLimitProblem(body);
  if (problem) throw invalidRequest(problem);
  const b = body as Record<string, unknown>;
  // The document allows no null for any field: a field is given with its type or left out.
  for (const field of ['workflow', 'workflowId', 'version'] as const) {
    if (b[field] !== undefined && typeof b[field] !== 'string') throw invalidRequest(`"${field}" must be a UUID string`);
  }
  const workflowId = (b.workflow ?? b.workflowId) as string | undefined;
  if (workflowId === undefined || workflowId === '') {
    throw new ApiError('missing_workflow', 'the body needs "workflow" (the workflow id)');
  }
  const own = pickIdempotencyKey(opts.itemKeyHeader, b.idempotencyKey);
  const metadata = checkMetadata(b.metadata);
  const now = Date.now();
  const startAt = startInstant(opts.startAfterSeconds ?? null, readStartAt(b.startAt, now), now);
  const debounce = readDebounce(b.debounce);
  if (debounce && (startAt !== null || b.startAt !== undefined || opts.startAfterSeconds)) {
    throw invalidRequest('"debounce" decides the start itself: not with Start-After or "startAt"');
  }
  const flow = checkFlowControl(b, principal.flow);
  // A non-UUID id is never read.
  if (!isUuid(workflowId)) throw notFound('workflow');
  return {
    index,
    workflowId,
    key: own ?? (opts.batch ? batchItemKey(deps, opts.batch.key, index) : null),
    ownKey: own !== null,
    requestedVersion: (b.version as string | undefined) ?? null,
    metadata,
    flow,
    inputs: b.inputs,
    startAt,
    debounce,
  };
}

/** The items checked, grouped by workflow (one read each); refused items go to `refuse`. In index order. */
async function checkItems(
  em: TransactionAwareEm,
  deps: Deps,
  principal: Principal,
  items: readonly Item[],
  opts: StartRunsOptions,
  memo: CheckMemo,
  attempt: number,
  refuse: (index: number, err: unknown) => void,
): Promise<(AcceptCall & { item: Item })[]> {
  const cache = workflowReadCache(deps.orm);
  const byWorkflow = new Map<string, Item[]>();
  for (const item of items) {
    const group = byWorkflow.get(item.workflowId);
    if (group) group.push(item);
    else byWorkflow.set(item.workflowId, [item]);
  }
  const calls: (AcceptCall & { item: Item })[] = [];
  for (const [workflowId, group] of byWorkflow) {
    const kept = attempt === 1 ? cache.get(principal.accountId, workflowId) : undefined;
    if (kept) cache.readAhead(principal.accountId, workflowId, () => findRead(outsideTransaction(deps.orm), principal, workflowId));
    let read = kept ?? (await readWorkflow(em, deps, principal, workflowId));
    const checkOn = async (r: KeptRead | null, item: Item) => {
      if (!r) throw notFound('workflow');
      const caller = { metadata: item.metadata, flow: item.flow, cancelAfterSeconds: opts.cancelAfterSeconds, startAt: item.startAt };
      const checked = await checkRun(em, deps, principal, r.row, item.inputs, item.requestedVersion, caller, memo);
      const replayOf = opts.replayOf?.[item.index];
      const run = replayOf === undefined ? checked : { ...checked, replayOf };
      calls.push({ item, run, idempotencyKey: item.key, fingerprint: fingerprintOf(deps, item, run, opts), token: r.token });
    };
    const again: Item[] = [];
    for (const item of group) {
      await checkOn(read, item).catch((err: unknown) => (kept && err instanceof ApiError ? again.push(item) : refuse(item.index, err)));
    }
    if (again.length === 0) continue;
    // A refusal is never decided from a kept read: the workflow may have changed since.
    cache.drop(principal.accountId, workflowId);
    read = await readWorkflow(em, deps, principal, workflowId);
    for (const item of again) await checkOn(read, item).catch((err: unknown) => refuse(item.index, err));
  }
  return calls.sort((a, b) => a.item.index - b.item.index);
}

/**
 * Only a keyed item needs its fingerprint: an HMAC over the normalised request (the metadata is not
 * part of it: a replay answers the original run, with its original metadata); an item keyed by its
 * batch's key has the batch body's.
 */
function fingerprintOf(deps: Deps, item: Item, run: { inputs: { values: unknown } }, opts: StartRunsOptions): string {
  if (item.key === null) return '';
  if (!item.ownKey) return opts.batch!.fingerprint;
  return deps.sealer.mac(canonicalJson({ workflow: item.workflowId, inputs: run.inputs.values, version: item.requestedVersion }));
}

/** One acceptance statement for checked calls (a keyed batch's under its key: batch-key.ts). */
type Accept = (calls: AcceptCall[]) => Promise<(Acceptance | ApiError)[]>;

/**
 * Accepts the checked items in one statement, one call per idempotency key (an item repeating a key of
 * an earlier one answers what it answers, or 409 for another request). Answers the items to check
 * again: their workflow changed since it was read.
 */
async function acceptItems(
  accept: Accept,
  deps: Deps,
  principal: Principal,
  checked: readonly (AcceptCall & { item: Item })[],
  fenced: boolean,
  outcomes: RunOutcome[],
  accepted: string[],
): Promise<Item[]> {
  const calls: (AcceptCall & { item: Item })[] = [];
  const followers = new Map<number, Item[]>();
  const byKey = new Map<string, AcceptCall & { item: Item }>();
  for (const c of checked) {
    const first = c.idempotencyKey === null ? undefined : byKey.get(c.idempotencyKey);
    if (!first) {
      if (c.idempotencyKey !== null) byKey.set(c.idempotencyKey, c);
      calls.push(fenced ? c : { ...c, token: null });
    } else if (first.fingerprint === c.fingerprint) {
      const same = followers.get(first.item.index);
      if (same) same.push(c.item);
      else followers.set(first.item.index, [c.item]);
    } else {
      outcomes[c.item.index] = { index: c.item.index, error: idempotencyConflict() };
    }
  }
  if (calls.length === 0) return [];
  // Runs queued in one statement may share a queued_at (the clock's resolution): the queue then orders
  // them by id, so ids ascend in index order.
  const ids = calls.map(() => randomUUID()).sort();
  const withIds = calls.map((c, i) => ({ ...c, run: { ...c.run, runId: ids[i] } }));
  const answers = await acceptInOrder(accept, deps, withIds);
  const stale: Item[] = [];
  answers.forEach(({ answer, joined }, i) => {
    const { item } = calls[i];
    const same = [item, ...(followers.get(item.index) ?? [])];
    if (answer === 'stale') {
      workflowReadCache(deps.orm).drop(principal.accountId, item.workflowId);
      return void stale.push(...same);
    }
    // A joined run was told of when its burst's first call accepted it; its start only ever moves later.
    if (!(answer instanceof ApiError) && !answer.replayed && !joined) accepted.push(answer.runId);
    for (const s of same) {
      outcomes[s.index] =
        answer instanceof ApiError
          ? { index: s.index, error: answer }
          : { index: s.index, run: acceptedRun(deps, answer.runId), replayed: answer.replayed || s !== item, ...(joined ? { debounced: true } : {}) };
    }
  });
  return stale.sort((a, b) => a.index - b.index);
}

/**
 * The calls' answers in order: the debounced ones each joined to or accepted as their key's run
 * (debounce-runs.ts), the others in one acceptance.
 */
async function acceptInOrder(accept: Accept, deps: Deps, calls: readonly (AcceptCall & { item: Item })[]): Promise<DebouncedAnswer[]> {
  const plain = calls.filter((c) => c.item.debounce === null);
  const plainAnswers = plain.length ? await accept(plain) : [];
  const byCall = new Map<AcceptCall, DebouncedAnswer>(plain.map((c, i) => [c, { answer: plainAnswers[i], joined: false }]));
  for (const c of calls) if (c.item.debounce !== null) byCall.set(c, await startDebounced(deps, c, c.item.debounce));
  return calls.map((c) => byCall.get(c)!);
}

const acceptedRun = (deps: Deps, runId: string): AcceptedRun => ({ id: runId, status: 'accepted', ...runUrls(deps.baseUrl(), runId) });

/**
 * After the commit: the engine hears of the new runs. The bus is not told of their `run.queued`:
 * nobody can be following a run before its id is answered, and a reader reads the log once it has
 * subscribed (src/runs/run-event-bus.ts).
 */
async function told(deps: Deps, accountId: string, runIds: readonly string[]): Promise<void> {
  if (runIds.length === 0) return;
  for (const _ of runIds) runAccepted();
  await Promise.all(
    runIds.map((runId) =>
      deps.engine.runAccepted(runId).catch((err) => {
        // The run is durably accepted; the engine also finds it by polling the queue.
        deps.log.error({ err, runId, accountId }, 'engine was not told about an accepted run');
      }),
    ),
  );
}

/** The workflow to run as the caller sees it, read fresh and kept for the caller's next requests; null when they cannot see it. */
async function readWorkflow(em: StatementEm, deps: Deps, principal: Principal, workflowId: string): Promise<KeptRead | null> {
  const read = await findRead(em, principal, workflowId);
  if (read) workflowReadCache(deps.orm).set(principal.accountId, workflowId, read);
  return read;
}

/** The workflow read, keeping nothing (the read ahead's: the cache keeps what it finds). */
async function findRead(em: StatementEm, principal: Principal, workflowId: string): Promise<KeptRead | null> {
  const found = await findWorkflowToRun(em, principal.accountId, workflowId, principal.apiKeyId, null);
  return found.row ? { row: found.row, token: found.token! } : null;
}
