import { randomUUID } from 'node:crypto';
import { json } from '../db/sql.ts';
import { ApiError, forbidden, invalidInputs, invalidRequest, notFound, type IntegrationErrorDetail } from '../domain/errors.ts';
import type { Graph } from '../domain/graph/types.ts';
import { countStepNodes } from '../domain/graph/validate.ts';
import { canonicalJson } from '../domain/canonical-json.ts';
import { resolveInputs } from '../domain/inputs.ts';
import { countCharacters, jsonLimitProblem } from '../domain/json-limits.ts';
import { checkMetadata } from '../domain/run-metadata.ts';
import { cancelAfterSeconds } from '../domain/run-deadline.ts';
import { displayedRunPrice, toDb } from '../domain/money.ts';
import type { Principal } from '../services/auth/authenticate-key.ts';
import type { Deps } from '../services/deps.ts';
import { isUuid } from '../domain/ids.ts';
import { getPricing } from '../catalog/pricing.ts';
import { accessOf, findVersion, findWorkflowToRun, type WorkflowAccess, type WorkflowRow } from '../services/workflows/workflow-access.ts';
import { runUrls, type AcceptedRun } from './run-views.ts';
import { outsideTransaction, query, type StatementEm, type TransactionAwareEm } from '../db/statement.ts';
import { ACCOUNT_CONNECTIONS } from '../sql/account-connections.ts';
import { runAccepted } from '../observability/metrics.ts';
import { scheduleNumbering } from './queue-line.ts';
import type { RequestRate } from './rate-limiter.ts';
import { acceptRun, type RunToAccept } from './accept-run.ts';
import { workflowReadCache, type KeptRead, type WorkflowReadCache } from './workflow-cache.ts';

/**
 * POST /runs: everything the spec checks synchronously, then one statement that writes the idempotency
 * record, the run, its `run.queued` event, its sealed password inputs and (through `runs.cap_usd`) the
 * key's spend-cap reservation (src/sql/accept-runs.ts, fenced on the workflow read). The workflow read is
 * kept a short while (workflow-cache.ts): a request that finds it kept sends only the acceptance, which
 * on a Postgres server also counts it in its key's rate window (accept-run.ts); one that does not reads
 * the workflow and counts the request with that read's statement, then accepts.
 * Funding happens later, during preparation (docs/architecture.md).
 */

export const IDEMPOTENCY_TTL_HOURS = 24;
const MAX_KEY = 255;

export interface StartRunRequest {
  /** The parsed JSON body (anything: it is checked here). */
  body: unknown;
  /** The Idempotency-Key header, if any. */
  idempotencyHeader?: string;
  /** The Cancel-After header, if any (src/domain/run-deadline.ts). */
  cancelAfterHeader?: string;
  /** The request's rate-limit count, taken by the workflow read or with the acceptance (counted-start.ts counts requests refused before either). */
  rate?: RequestRate;
}

export interface StartRunResult {
  run: AcceptedRun;
  replayed: boolean;
}

export async function startRun(deps: Deps, principal: Principal, req: StartRunRequest): Promise<StartRunResult> {
  if (req.body === null || typeof req.body !== 'object' || Array.isArray(req.body)) {
    throw invalidRequest('the request body must be a JSON object');
  }
  // Before anything recursive or any database write sees it (deep nesting, NUL, lone surrogates).
  const problem = jsonLimitProblem(req.body);
  if (problem) throw invalidRequest(problem);
  const body = req.body as Record<string, unknown>;
  // The document allows no null for any field: a field is given with its type or left out.
  for (const field of ['workflow', 'workflowId', 'version'] as const) {
    if (body[field] !== undefined && typeof body[field] !== 'string') throw invalidRequest(`"${field}" must be a UUID string`);
  }
  const workflowId = (body.workflow ?? body.workflowId) as string | undefined;
  if (workflowId === undefined || workflowId === '') {
    throw new ApiError('missing_workflow', 'the body needs "workflow" (the workflow id)');
  }
  const idempotencyKey = pickIdempotencyKey(req.idempotencyHeader, body.idempotencyKey);
  const requestedVersion = (body.version as string | undefined) ?? null;
  const metadata = checkMetadata(body.metadata);
  const cancelAfter = cancelAfterSeconds(req.cancelAfterHeader);

  // Only statements outside a transaction (the acceptance opens its own): no fork, no entity manager to build.
  const em = outsideTransaction(deps.orm);
  // A non-UUID id is never read; counted-start.ts counts the request before answering 404.
  if (!isUuid(workflowId)) throw notFound('workflow');
  const cache = workflowReadCache(deps.orm);
  let kept = cache.get(principal.accountId, workflowId);
  if (kept) cache.readAhead(principal.accountId, workflowId, () => readAhead(deps, principal, workflowId));
  for (let attempt = 1; ; attempt++) {
    const read = kept ?? (await readWorkflow(em, principal, workflowId, req.rate, cache));
    let run: RunToAccept;
    try {
      run = await checkRun(em, deps, principal, read.row, body.inputs, requestedVersion, { metadata, cancelAfterSeconds: cancelAfter });
    } catch (err) {
      // A refusal is never decided from a kept read: the workflow may have changed since.
      if (!kept || !(err instanceof ApiError)) throw err;
      cache.drop(principal.accountId, workflowId);
      kept = undefined;
      continue;
    }
    // Only a request with an idempotency key needs its fingerprint (an HMAC over the normalised request; the
    // metadata is not part of it: a replay answers the original run, with its original metadata).
    const fingerprint =
      idempotencyKey === null
        ? ''
        : deps.sealer.mac(canonicalJson({ workflow: read.row.id, inputs: run.inputs.values, version: requestedVersion }));
    // A workflow that keeps changing under the request is accepted on its latest read, unfenced, as before the cache.
    const token = attempt < MAX_READS ? read.token : null;
    const outcome = await acceptRun(em, deps, run, idempotencyKey, fingerprint, token, req.rate);
    if (outcome !== 'stale') return accepted(deps, outcome.runId, principal.accountId, outcome.replayed);
    // Changed since it was read: read again (the request was counted) and check again.
    cache.drop(principal.accountId, workflowId);
    kept = undefined;
  }
}

/** Reads of the workflow one request may make when it keeps changing under it (the last is not fenced). */
const MAX_READS = 3;

/** The synchronous checks of the spec on one read of the workflow: what to accept, or the refusal. */
async function checkRun(
  em: TransactionAwareEm,
  deps: Deps,
  principal: Principal,
  row: WorkflowRow,
  inputs: unknown,
  requestedVersion: string | null,
  caller: Pick<RunToAccept, 'metadata' | 'cancelAfterSeconds'>,
): Promise<RunToAccept> {
  const pricing = await getPricing(em);
  const access = accessOf(row, principal.accountId, pricing);
  checkEntitlement(access);

  const version = await resolveVersion(em, access, requestedVersion);
  const resolved = resolveInputs(version.graph, inputs);
  if (!resolved.ok) throw invalidInputs(resolved.errors);
  await checkIntegrations(em, deps, principal.accountId, version.graph);

  const steps = countStepNodes(version.graph);
  const displayed = displayedRunPrice(access.creatorPriceUsd, pricing.stepUsd, steps);
  return {
    runId: randomUUID(),
    principal,
    access,
    versionId: version.id,
    inputs: resolved.inputs,
    ...caller,
    displayedPriceUsd: toDb(displayed),
    stepUsd: pricing.stepUsd,
  };
}

/**
 * After the commit: the engine hears of a new run; the 202's body. The bus is not told of its
 * `run.queued`: nobody can be following a run before its id is answered, and a reader reads the log
 * once it has subscribed (src/runs/run-event-bus.ts).
 */
async function accepted(deps: Deps, runId: string, accountId: string, replayed: boolean): Promise<StartRunResult> {
  if (!replayed) {
    runAccepted();
    scheduleNumbering(deps);
    await deps.engine.runAccepted(runId).catch((err) => {
      // The run is durably accepted; the engine also finds it by polling the queue.
      deps.log.error({ err, runId, accountId }, 'engine was not told about an accepted run');
    });
  }
  return { run: { id: runId, status: 'accepted', ...runUrls(deps.baseUrl(), runId) }, replayed };
}

/**
 * The workflow to run, read fresh, with the request counted in its key's rate window first: by the
 * read's own statement when the limiter is the database's, else on its own just before (nothing more
 * when it was counted already). Throws 429 when the window is full (whether or not the workflow
 * exists), 404 when the caller cannot see it. Keeps the read for the caller's next requests.
 */
async function readWorkflow(
  em: StatementEm,
  principal: Principal,
  workflowId: string,
  rate: RequestRate | undefined,
  cache: WorkflowReadCache,
): Promise<KeptRead> {
  const limit = rate ? await rate.statementLimit() : null;
  const found = await findWorkflowToRun(em, principal.accountId, workflowId, principal.apiKeyId, limit);
  if (limit !== null) rate!.folded(found.hit!);
  if (!found.row) throw notFound('workflow');
  const read = { row: found.row, token: found.token! };
  cache.set(principal.accountId, workflowId, read);
  return read;
}

/** The workflow read again for the cache, counting nothing (its own connection: nobody waits for it). */
async function readAhead(deps: Deps, principal: Principal, workflowId: string): Promise<KeptRead | null> {
  const found = await findWorkflowToRun(outsideTransaction(deps.orm), principal.accountId, workflowId, principal.apiKeyId, null);
  return found.row ? { row: found.row, token: found.token! } : null;
}

/** Header or body; equal after trimming when both are present (idempotency rule 1). */
export function pickIdempotencyKey(header: string | undefined, bodyKey: unknown): string | null {
  if (bodyKey !== undefined && typeof bodyKey !== 'string') throw invalidRequest('idempotencyKey must be a string');
  // As sent, as the document's maxLength counts: in characters (code points), not UTF-16 units.
  for (const sent of [header, bodyKey]) {
    if (sent !== undefined && countCharacters(sent) > MAX_KEY) throw invalidRequest(`the idempotency key must be at most ${MAX_KEY} characters`);
  }
  const h = header?.trim();
  const b = bodyKey?.trim();
  if (h !== undefined && b !== undefined && h !== b) {
    throw invalidRequest('the Idempotency-Key header and the body idempotencyKey differ');
  }
  const key = h ?? b;
  if (key === undefined) return null;
  if (key.length === 0) throw invalidRequest('the idempotency key must not be empty');
  return key;
}

function checkEntitlement(a: WorkflowAccess): void {
  if (a.userAccess === 'purchase_required') {
    throw forbidden('this workflow must be purchased on the web before it can be run; the API cannot purchase');
  }
  if (!a.row.apiAccess) throw forbidden('the creator has not allowed API runs of this workflow');
  if (!a.isOwner && a.row.ownerListingsPaused) {
    throw new ApiError('creator_listings_paused', "the creator's listings are paused; runs are not accepted for now");
  }
}

/** Version resolution rules 1–5 (spec) with the pinned-buyer rule of docs/design/rules.md. */
async function resolveVersion(em: StatementEm, a: WorkflowAccess, requested: string | null): Promise<{ id: string; graph: Graph }> {
  const unusable = () => forbidden('that version does not exist or you may not run it');
  if (requested === null) {
    if (!a.row.shownVersion) throw forbidden('this workflow has no published version');
    return a.row.shownVersion;
  }
  if (!isUuid(requested)) throw unusable();
  const allowed = a.isOwner
    ? true
    : a.row.pinnedVersionId
      ? requested === a.row.pinnedVersionId
      : requested === a.row.activeVersionId;
  if (!allowed) throw unusable();
  const v = await findVersion(em, a.row.id, requested);
  if (!v) throw unusable();
  return v;
}

async function checkIntegrations(em: StatementEm, deps: Deps, accountId: string, graph: Graph): Promise<void> {
  const needed = graph.nodes.filter((n) => n.integration).map((n) => n.integration!);
  if (needed.length === 0) return;
  const [acct] = await query<{ connections: unknown }>(em, ACCOUNT_CONNECTIONS, [accountId]);
  const connected = new Set(json<string[]>(acct?.connections ?? '[]'));
  const origin = new URL(deps.baseUrl()).origin;
  const missing = new Map<string, IntegrationErrorDetail>();
  for (const i of needed) {
    if (connected.has(i.provider)) continue;
    const prior = missing.get(i.provider);
    missing.set(i.provider, {
      provider: i.name,
      providerId: i.provider,
      makesChanges: Boolean(prior?.makesChanges || i.makesChanges),
      connectUrl: `${origin}/connections/${encodeURIComponent(i.provider)}`,
    });
  }
  if (missing.size) {
    const names = [...missing.values()].map((m) => m.provider).join(', ');
    throw new ApiError('integration_connection_required', `connect ${names} to your account before running this workflow`, {
      details: [...missing.values()],
    });
  }
}
