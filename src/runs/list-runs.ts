import { DATE_TIME_RULE, readDateTime } from '../domain/date-time.ts';
import { invalidRequest } from '../domain/errors.ts';
import { checkMetadata } from '../domain/run-metadata.ts';
import type { RunStatus } from '../domain/run-status.ts';
import { fork, type Deps } from '../services/deps.ts';
import { pageOf } from '../services/pagination.ts';
import { LIST_RUNS, LIST_RUNS_BY_LABEL } from '../sql/runs.ts';
import { query } from '../db/statement.ts';
import { mapRunRow, toRunListItem } from './run-views.ts';

export interface ListRunsQuery {
  offset?: number;
  limit?: number;
  status?: string;
  workflow?: string;
  /** `metadata[KEY]=VALUE` pairs: runs whose metadata holds every one. */
  metadata?: unknown;
  /** Runs created at or after this instant (RFC 3339). */
  createdAfter?: string;
  /** Runs created before this instant (RFC 3339). */
  createdBefore?: string;
}

/**
 * The account's runs, newest first; `running` also matches suspended runs (docs/design/rules.md), with
 * the filters of docs/design/run-metadata.md#filters.
 */
export async function listRuns(deps: Deps, accountId: string, q: ListRunsQuery) {
  const page = pageOf(q.offset, q.limit);
  // `status` and `workflow` were checked against the document (an enumeration, a UUID).
  const statuses: RunStatus[] | null = q.status === undefined ? null : q.status === 'running' ? ['running', 'suspended'] : [q.status as RunStatus];
  const metadata = Object.entries(checkMetadata(q.metadata, 'the metadata filter'));
  const range = [instant(q.createdAfter, 'createdAfter'), instant(q.createdBefore, 'createdBefore')];
  const values = [accountId, statuses, q.workflow ?? null, page.limit + 1, page.offset, ...range];
  const [first] = metadata;
  const rows = first
    ? await query(fork(deps), LIST_RUNS_BY_LABEL, [...values, first[0], first[1], JSON.stringify(Object.fromEntries(metadata))])
    : await query(fork(deps), LIST_RUNS, values);
  return {
    runs: rows.slice(0, page.limit).map((r) => toRunListItem(mapRunRow(r))),
    pagination: { ...page, hasMore: rows.length > page.limit },
  };
}

/** The instants a run can be created at, as far as a filter is concerned: Postgres's years 1 to 9999. */
const EARLIEST = Date.parse('0001-01-01T00:00:00Z');
const LATEST = Date.parse('9999-12-31T23:59:59.999Z');

/**
 * An RFC 3339 date-time (src/domain/date-time.ts; the document's validation refused anything else) as
 * the UTC instant Postgres reads, or null when absent. Converted here because RFC 3339 takes offsets up
 * to ±23:59 and Postgres only up to ±15:59, and clamped to years Postgres writes (no run was created
 * outside them, so the filter means the same).
 */
function instant(value: string | undefined, name: string): string | null {
  if (value === undefined) return null;
  const read = readDateTime(value);
  if (!read) throw invalidRequest(`${name} ${DATE_TIME_RULE}`);
  const at = read.epochMs;
  if (at < EARLIEST || at > LATEST) return new Date(Math.min(LATEST, Math.max(EARLIEST, at))).toISOString();
  // The fraction is kept as written (Postgres keeps microseconds, a Date milliseconds).
  return `${new Date(at).toISOString().slice(0, 19)}${read.fraction ? `.${read.fraction}` : ''}Z`;
}
