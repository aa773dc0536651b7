import { createHash } from 'node:crypto';
import { ApiError, invalidRequest } from '../domain/errors.ts';
import { isUuid } from '../domain/ids.ts';
import type { RunStatus } from '../domain/run-status.ts';
import { query } from '../db/statement.ts';
import { ACCOUNT_RUN_STATUSES, MATCH_RUNS, MATCH_RUNS_BY_LABEL, labelOf, type RunListCall } from '../sql/runs.ts';
import { canonicalJson } from '../domain/canonical-json.ts';
import { fork, type RunsDeps } from './deps.ts';
import { parseRunFilter, type RunFilter } from './run-filter.ts';

/**
 * Which runs a bulk call names (docs/design/runs-in-sets.md): `{"ids": [...]}` (at most MAX_RUNS_PER_CALL,
 * each answered, an unknown one or another account's `not_found`) or `{"filter": {...}, "cursor"?}`: one
 * page of at most MAX_RUNS_PER_CALL runs the filter matches, in the list's order (newest first), with a
 * cursor to the next page when more match. The cursor is a keyset (the last run's creation instant and
 * id), so a page is the same whatever the calls before it changed (a cancelled run leaving a status filter
 * does not shift the pages after it).
 */

export const MAX_RUNS_PER_CALL = 1000;

export type RunSelection = { kind: 'ids'; ids: string[] } | { kind: 'filter'; filter: RunFilter; cursor: Keyset | null; fingerprint: string };

/** A row of MATCH_RUNS: a run and its creation instant as the keyset's text. */
interface MatchedRun {
  id: string;
  status: RunStatus;
  created_key: string;
}

interface Keyset {
  at: string;
  id: string;
}

export interface SelectedRun {
  id: string;
  status: RunStatus;
}

export interface SelectedRuns {
  runs: SelectedRun[];
  /** The ids given that name no run of the account, in the order given (ids only). */
  notFound: string[];
  /** The cursor to the next page of a filter, or null: no more. */
  nextCursor: string | null;
}

/** A bulk call's body: exactly one of `ids` and `filter` (with its `cursor`); `extra` names the other members the call takes. */
export function parseRunSelection(body: unknown, extra: readonly string[] = []): RunSelection {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw invalidRequest('the request body must be a JSON object');
  const given = body as Record<string, unknown>;
  const allowed = ['ids', 'filter', 'cursor', ...extra];
  const unknown = Object.keys(given).find((k) => !allowed.includes(k));
  if (unknown !== undefined) throw invalidRequest(`unknown member "${unknown}"; allowed: ${allowed.join(', ')}`);
  if ((given.ids === undefined) === (given.filter === undefined)) throw invalidRequest('give exactly one of "ids" and "filter"');
  if (given.ids !== undefined) {
    if (given.cursor !== undefined) throw invalidRequest('"cursor" continues a filter; it is not taken with "ids"');
    const ids = given.ids;
    if (!Array.isArray(ids) || ids.length === 0 || ids.length > MAX_RUNS_PER_CALL || ids.some((id) => typeof id !== 'string')) {
      throw invalidRequest(`ids must be a list of 1 to ${MAX_RUNS_PER_CALL} run ids`);
    }
    return { kind: 'ids', ids: ids as string[] };
  }
  const filter = parseRunFilter(given.filter);
  const fingerprint = createHash('sha256').update(canonicalJson(filter)).digest('base64url').slice(0, 16);
  return { kind: 'filter', filter, fingerprint, cursor: given.cursor === undefined || given.cursor === null ? null : keysetOf(given.cursor, fingerprint) };
}

/** The runs of `accountId` the selection names: the given ids, or the filter's page (at most `limit`). */
export async function selectRuns(deps: RunsDeps, accountId: string, selection: RunSelection, limit = MAX_RUNS_PER_CALL): Promise<SelectedRuns> {
  const em = fork(deps);
  if (selection.kind === 'ids') {
    const wanted = [...new Set(selection.ids.filter(isUuid).map((id) => id.toLowerCase()))];
    const rows = wanted.length === 0 ? [] : await query<{ id: string; status: RunStatus }>(em, ACCOUNT_RUN_STATUSES, [wanted, accountId]);
    const found = new Map(rows.map((r) => [String(r.id), r.status]));
    const runs = wanted.filter((id) => found.has(id)).map((id) => ({ id, status: found.get(id)! }));
    return { runs, notFound: selection.ids.filter((id) => !found.has(id.toLowerCase())), nextCursor: null };
  }
  const { filter, cursor } = selection;
  const call: RunListCall = {
    account_id: accountId,
    statuses: filter.statuses,
    workflow_id: filter.workflow,
    created_after: filter.createdAfter,
    created_before: filter.createdBefore,
    max_rows: limit + 1,
    metadata: filter.metadata,
    past_created: cursor?.at ?? null,
    past_id: cursor?.id ?? null,
  };
  const label = labelOf(filter.metadata);
  const rows = await query<MatchedRun>(em, label ? MATCH_RUNS_BY_LABEL : MATCH_RUNS, [{ ...call, ...label }]);
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  const nextCursor = rows.length > limit && last ? cursorOf({ at: last.created_key, id: last.id }, selection.fingerprint) : null;
  return { runs: page.map((r) => ({ id: r.id, status: r.status })), notFound: [], nextCursor };
}

/** A cursor: the keyset and the fingerprint of the filter it continues, as base64url JSON. */
function cursorOf(keyset: Keyset, fingerprint: string): string {
  return Buffer.from(JSON.stringify({ ...keyset, f: fingerprint })).toString('base64url');
}

function keysetOf(cursor: unknown, fingerprint: string): Keyset {
  const refuse = () => new ApiError('invalid_cursor', 'cursor must be the nextCursor of a call with the same filter');
  if (typeof cursor !== 'string') throw refuse();
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw refuse();
  }
  const { at, id, f } = (parsed ?? {}) as Record<string, unknown>;
  if (f !== fingerprint || typeof at !== 'string' || !Number.isFinite(Date.parse(at)) || !isUuid(id)) throw refuse();
  return { at, id };
}
