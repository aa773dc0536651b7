import { randomUUID } from 'node:crypto';
import { json } from '../db/sql.ts';
import { ApiError, forbidden, invalidInputs, invalidRequest, type IntegrationErrorDetail } from '../domain/errors.ts';
import type { Graph } from '../domain/graph/types.ts';
import { countStepNodes } from '../domain/graph/validate.ts';
import { resolveInputs } from '../domain/inputs.ts';
import { countCharacters } from '../domain/json-limits.ts';
import { displayedRunPrice, toDb } from '../domain/money.ts';
import type { Principal } from '../domain/principal.ts';
import type { Deps } from './deps.ts';
import { isUuid } from '../domain/ids.ts';
import { getPricing } from '../catalog/pricing.ts';
import { accessOf, findVersion, type WorkflowAccess, type WorkflowRow } from '../catalog/workflow-access.ts';
import { query, type StatementEm, type TransactionAwareEm } from '../db/statement.ts';
import { ACCOUNT_CONNECTIONS } from '../sql/account-connections.ts';
import type { RunToAccept } from './accept-run.ts';

/**
 * The one check of a run to start (POST /runs and every item of POST /runs/batch): entitlement,
 * version, inputs and integrations on one read of the workflow. Refusals are thrown as the ApiError
 * POST /runs answers; the batch answers the same error for the item.
 */

const MAX_KEY = 255;

/** Reads the checks of one set of runs share (one caller, read once per set). */
export interface CheckMemo {
  connections?: Promise<Set<string>>;
  versions?: Map<string, Promise<Awaited<ReturnType<typeof findVersion>>>>;
}

/** The synchronous checks of the spec on one read of the workflow: what to accept, or the refusal. */
export async function checkRun(
  em: TransactionAwareEm,
  deps: Deps,
  principal: Principal,
  row: WorkflowRow,
  inputs: unknown,
  requestedVersion: string | null,
  caller: Pick<RunToAccept, 'metadata' | 'flow' | 'cancelAfterSeconds' | 'startAt'>,
  memo: CheckMemo = {},
): Promise<RunToAccept> {
  const pricing = await getPricing(em);
  const access = accessOf(row, principal.accountId, pricing);
  checkEntitlement(access);

  const version = await resolveVersion(em, access, requestedVersion, memo);
  const resolved = resolveInputs(version.graph, inputs);
  if (!resolved.ok) throw invalidInputs(resolved.errors);
  await checkIntegrations(em, deps, principal.accountId, version.graph, memo);

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
async function resolveVersion(em: StatementEm, a: WorkflowAccess, requested: string | null, memo: CheckMemo): Promise<{ id: string; graph: Graph }> {
  const unusable = () => forbidden('that version does not exist or you may not run it');
  if (requested === null) {
    if (!a.row.shownVersion) throw forbidden('this workflow has no published version');
    return a.row.shownVersion;
  }
  if (!isUuid(requested)) throw unusable();
  const allowed = a.isOwner ? true : a.row.pinnedVersionId ? requested === a.row.pinnedVersionId : requested === a.row.activeVersionId;
  if (!allowed) throw unusable();
  const versions = (memo.versions ??= new Map<string, Promise<Awaited<ReturnType<typeof findVersion>>>>());
  let found = versions.get(`${a.row.id}:${requested}`);
  if (!found) versions.set(`${a.row.id}:${requested}`, (found = findVersion(em, a.row.id, requested)));
  const v = await found;
  if (!v) throw unusable();
  return v;
}

async function checkIntegrations(em: StatementEm, deps: Deps, accountId: string, graph: Graph, memo: CheckMemo): Promise<void> {
  const needed = graph.nodes.filter((n) => n.integration).map((n) => n.integration!);
  if (needed.length === 0) return;
  const connected = await (memo.connections ??= query<{ connections: unknown }>(em, ACCOUNT_CONNECTIONS, [accountId]).then(
    ([acct]) => new Set(json<string[]>(acct?.connections ?? '[]')),
  ));
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
