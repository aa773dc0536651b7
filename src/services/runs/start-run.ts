import { randomUUID } from 'node:crypto';
import type { Em } from '../../db/orm.ts';
import { json } from '../../db/sql.ts';
import { ApiError, forbidden, invalidInputs, invalidRequest, notFound, type IntegrationErrorDetail } from '../../domain/errors.ts';
import type { Graph } from '../../domain/graph/types.ts';
import { countStepNodes } from '../../domain/graph/validate.ts';
import { canonicalJson, resolveInputs, type ResolvedInputs } from '../../domain/inputs.ts';
import { jsonLimitProblem } from '../../domain/json-limits.ts';
import { toDb, usd } from '../../domain/money.ts';
import type { Principal } from '../auth/authenticate-key.ts';
import { fork, type Deps } from '../deps.ts';
import { isUuid } from '../ids.ts';
import { getPricing } from '../pricing.ts';
import { accessOf, findVersion, findVisibleWorkflow, type WorkflowAccess } from '../workflows/workflow-access.ts';
import { runUrls, type AcceptedRun } from './run-views.ts';
import { prepared } from '../../db/prepared.ts';

/**
 * POST /runs: everything the spec checks synchronously, then one transaction that writes the run, its
 * `run.queued` event, its sealed password inputs, the idempotency record and (through `runs.cap_usd`)
 * the key's spend-cap reservation. Funding happens later, during preparation.
 */

export const IDEMPOTENCY_TTL_HOURS = 24;
const MAX_KEY = 255;

export interface StartRunRequest {
  /** The parsed JSON body (anything: it is checked here). */
  body: unknown;
  /** The Idempotency-Key header, if any. */
  idempotencyHeader?: string;
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
  const workflowId = body.workflow ?? body.workflowId;
  if (workflowId === undefined || workflowId === null || workflowId === '') {
    throw new ApiError('missing_workflow', 'the body needs "workflow" (the workflow id)');
  }
  if (typeof workflowId !== 'string') throw invalidRequest('"workflow" must be a UUID string');
  const idempotencyKey = pickIdempotencyKey(req.idempotencyHeader, body.idempotencyKey);
  if (body.version !== undefined && body.version !== null && typeof body.version !== 'string') {
    throw invalidRequest('"version" must be a UUID string');
  }
  const requestedVersion = (body.version as string | null | undefined) ?? null;

  const em = fork(deps);
  const row = isUuid(workflowId) ? await findVisibleWorkflow(em, principal.accountId, workflowId) : null;
  if (!row) throw notFound('workflow');
  const pricing = await getPricing(em);
  const access = accessOf(row, principal.accountId, pricing);
  checkEntitlement(access);

  const version = await resolveVersion(em, access, requestedVersion);
  const resolved = resolveInputs(version.graph, body.inputs);
  if (!resolved.ok) throw invalidInputs(resolved.errors);
  await checkIntegrations(em, deps, principal.accountId, version.graph);

  const steps = countStepNodes(version.graph);
  const displayed = usd(access.creatorPriceUsd).plus(usd(pricing.stepUsd).times(steps));
  // Only a request with an idempotency key needs its fingerprint (an HMAC over the normalised request).
  const fingerprint =
    idempotencyKey === null
      ? ''
      : deps.sealer.mac(canonicalJson({ workflow: row.id, inputs: resolved.inputs.values, version: requestedVersion }));

  const runId = randomUUID();
  const run = {
    runId,
    principal,
    access,
    versionId: version.id,
    inputs: resolved.inputs,
    displayedPriceUsd: toDb(displayed),
    stepUsd: pricing.stepUsd,
  };
  // The run, its event and its secrets are one statement, atomic on its own: a transaction is needed
  // only to serialise an idempotency key or a spend cap with the insert (and saves a BEGIN and a
  // COMMIT round trip on every other request).
  if (idempotencyKey === null && principal.spendCap === null) {
    await insertRun(em, deps, run);
    return accepted(deps, runId, false);
  }
  const outcome = await em.transactional(async (tx) => {
    if (idempotencyKey !== null) {
      const prior = await claimIdempotencyKey(tx, principal.accountId, idempotencyKey, fingerprint);
      if (prior) return { runId: prior, replayed: true };
    }
    await checkSpendCap(tx, principal, displayed.toString());
    await insertRun(tx, deps, run);
    if (idempotencyKey !== null) {
      await tx.execute(
        `insert into idempotency_records (id, account_id, key, fingerprint, run_id, created_at, expires_at)
         values (?, ?, ?, ?, ?, now(), now() + interval '${IDEMPOTENCY_TTL_HOURS} hours')`,
        [randomUUID(), principal.accountId, idempotencyKey, fingerprint, runId],
      );
    }
    return { runId, replayed: false };
  });

  return accepted(deps, outcome.runId, outcome.replayed);
}

/** After the commit: live readers and the engine hear of a new run; the 202's body. */
async function accepted(deps: Deps, runId: string, replayed: boolean): Promise<StartRunResult> {
  if (!replayed) {
    deps.bus.publish(runId, 1);
    await deps.engine.runAccepted(runId).catch((err) => {
      // The run is durably accepted; the engine also finds it by polling the queue.
      deps.log.error({ err, runId }, 'engine was not told about an accepted run');
    });
  }
  return { run: { id: runId, status: 'accepted', ...runUrls(deps.baseUrl(), runId) }, replayed };
}

/** Header or body; equal after trimming when both are present (idempotency rule 1). */
export function pickIdempotencyKey(header: string | undefined, bodyKey: unknown): string | null {
  if (bodyKey !== undefined && bodyKey !== null && typeof bodyKey !== 'string') {
    throw invalidRequest('idempotencyKey must be a string');
  }
  const h = header?.trim();
  const b = typeof bodyKey === 'string' ? bodyKey.trim() : undefined;
  if (header !== undefined && bodyKey !== undefined && bodyKey !== null && h !== b) {
    throw invalidRequest('the Idempotency-Key header and the body idempotencyKey differ');
  }
  const key = header !== undefined ? h : b;
  if (key === undefined) return null;
  if (key.length === 0) throw invalidRequest('the idempotency key must not be empty');
  if (key.length > MAX_KEY) throw invalidRequest(`the idempotency key must be at most ${MAX_KEY} characters`);
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
async function resolveVersion(em: Em, a: WorkflowAccess, requested: string | null): Promise<{ id: string; graph: Graph }> {
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

async function checkIntegrations(em: Em, deps: Deps, accountId: string, graph: Graph): Promise<void> {
  const needed = graph.nodes.filter((n) => n.integration).map((n) => n.integration!);
  if (needed.length === 0) return;
  const [acct] = await em.execute<{ connections: unknown }[]>('select connections from accounts where id = ?', [accountId]);
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

/**
 * Serialises requests with one key (advisory lock), so N concurrent identical requests make one run.
 * Returns the original run id on a replay, throws on a fingerprint mismatch, null when the key is new.
 */
async function claimIdempotencyKey(tx: Em, accountId: string, key: string, fingerprint: string): Promise<string | null> {
  await tx.execute('select pg_advisory_xact_lock(hashtextextended(?, 0))', [`idem:${accountId}:${key}`]);
  const [prior] = await tx.execute<{ fingerprint: string; run_id: string; expired: boolean }[]>(
    'select fingerprint, run_id, expires_at <= now() as expired from idempotency_records where account_id = ? and key = ?',
    [accountId, key],
  );
  if (!prior) return null;
  if (prior.expired) {
    await tx.execute('delete from idempotency_records where account_id = ? and key = ?', [accountId, key]);
    return null;
  }
  if (prior.fingerprint !== fingerprint) {
    throw new ApiError('idempotency_conflict', 'this idempotency key was already used with a different request; use a new key to start a new run');
  }
  return String(prior.run_id);
}

export function windowStart(window: 'daily' | 'monthly' | 'lifetime', now = new Date()): Date {
  if (window === 'daily') return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()));
  if (window === 'monthly') return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
  return new Date(0);
}

/**
 * The key's settled and reserved charges in its window plus this run's displayed price must stay
 * within the cap. The key row lock makes concurrent acceptances on one key check one after another.
 */
async function checkSpendCap(tx: Em, principal: Principal, displayedUsd: string): Promise<void> {
  const cap = principal.spendCap;
  if (!cap) return;
  await tx.execute('select id from api_keys where id = ? for update', [principal.apiKeyId]);
  const [row] = await tx.execute<{ spent: string | null }[]>(
    'select coalesce(sum(cap_usd), 0) as spent from runs where api_key_id = ? and created_at >= ?',
    [principal.apiKeyId, windowStart(cap.window)],
  );
  const total = usd(row?.spent ?? 0).plus(usd(displayedUsd));
  if (total.greaterThan(usd(cap.usd))) {
    throw new ApiError('spend_cap_reached', `this API key's ${cap.window} spend cap of $${toDb(cap.usd)} would be exceeded by this run`);
  }
}

async function insertRun(
  tx: Em,
  deps: Deps,
  r: { runId: string; principal: Principal; access: WorkflowAccess; versionId: string; inputs: ResolvedInputs; displayedPriceUsd: string; stepUsd: string },
): Promise<void> {
  const publicInputs = { ...r.inputs.values };
  const secrets: unknown[] = [];
  const tuples: string[] = [];
  for (const id of r.inputs.passwordIds) {
    const value = publicInputs[id];
    publicInputs[id] = null;
    if (typeof value === 'string') {
      secrets.push(randomUUID(), r.runId, 'password_input', id, deps.sealer.seal(value));
      tuples.push(`(?, ?, ?, ?, ?, now())`);
    }
  }
  const computeLimit = r.access.row.computeLimitUsd ?? deps.config.computeLimitUsd;
  // The run, its first event (`run.queued`, sequence 1) and its sealed password inputs in one statement.
  const sealed = tuples.length ? `, s as (insert into run_secrets (id, run_id, kind, name, ciphertext, created_at) values ${tuples.join(', ')})` : '';
  await tx.execute(
    prepared(`with r as (
       insert into runs (id, account_id, api_key_id, workflow_id, version_id, status, phase, billing_status,
                         cap_usd, user_access, displayed_price_usd, creator_price_usd, step_usd, compute_limit_usd,
                         credential_mode, inputs, progress, outputs, engine, last_sequence, created_at, queued_at, updated_at)
       values (?, ?, ?, ?, ?, 'pending', 'queued', 'pending', ?, ?, ?, ?, ?, ?, ?, ?::jsonb, ?::jsonb, '[]'::jsonb, ?, 1,
               clock_timestamp(), clock_timestamp(), clock_timestamp())
       returning id, created_at)${sealed}
     insert into run_events (run_id, sequence, type, node_id, data, ts)
     select r.id, 1, 'run.queued', null, '{"status":"pending"}'::jsonb, r.created_at from r`),
    [
      r.runId,
      r.principal.accountId,
      r.principal.apiKeyId,
      r.access.row.id,
      r.versionId,
      r.displayedPriceUsd,
      r.access.userAccess,
      r.displayedPriceUsd,
      r.access.creatorPriceUsd,
      r.stepUsd,
      toDb(computeLimit),
      r.access.row.credentialMode,
      JSON.stringify(publicInputs),
      JSON.stringify({ results: {}, timers: {} }),
      deps.engine.name,
      ...secrets,
    ],
  );
}
