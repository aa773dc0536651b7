import { DATE_TIME_RULE, readDateTime } from '../domain/date-time.ts';
import { invalidRequest } from '../domain/errors.ts';
import { isUuid } from '../domain/ids.ts';
import { checkMetadata, type RunMetadata } from '../domain/run-metadata.ts';
import { LIST_STATUSES, type RunStatus } from '../domain/run-status.ts';

/**
 * The filter of a bulk call on runs (POST /runs/cancel, POST /runs/replay: docs/design/runs-in-sets.md),
 * the filters of GET /runs given as a JSON object: `status` a list of list statuses (`running` also
 * matches suspended runs), `workflow`, `metadata` (every pair held), `createdAfter`, `createdBefore`.
 */
export interface RunFilter {
  /** Run statuses matched, or null: any. */
  statuses: RunStatus[] | null;
  workflow: string | null;
  metadata: RunMetadata;
  /** UTC instants as Postgres reads them (instant), or null: unbounded. */
  createdAfter: string | null;
  createdBefore: string | null;
}

const FILTER_KEYS = ['status', 'workflow', 'metadata', 'createdAfter', 'createdBefore'];

/** A request's `filter`, checked: an object of at least one of FILTER_KEYS, each of its form. */
export function parseRunFilter(value: unknown): RunFilter {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw invalidRequest('filter must be an object');
  const given = value as Record<string, unknown>;
  const unknown = Object.keys(given).find((k) => !FILTER_KEYS.includes(k));
  if (unknown !== undefined) throw invalidRequest(`filter has an unknown member "${unknown}"; allowed: ${FILTER_KEYS.join(', ')}`);
  // The document allows no null member: a filter is given with its form or left out.
  const nulled = Object.keys(given).find((k) => given[k] === null);
  if (nulled !== undefined) throw invalidRequest(`filter.${nulled} must not be null; leave it out`);
  if (Object.values(given).every((v) => v === undefined)) {
    throw invalidRequest(`filter must not be empty: give at least one of ${FILTER_KEYS.join(', ')}`);
  }
  return {
    statuses: statusesOf(given.status),
    workflow: workflowOf(given.workflow),
    metadata: checkMetadata(given.metadata, 'filter.metadata'),
    createdAfter: dateTime(given.createdAfter, 'filter.createdAfter'),
    createdBefore: dateTime(given.createdBefore, 'filter.createdBefore'),
  };
}

/** A list status as the statuses it matches: `running` also matches suspended runs (docs/design/rules.md). */
export const statusesOfListStatus = (status: string): RunStatus[] => (status === 'running' ? ['running', 'suspended'] : [status as RunStatus]);

function statusesOf(value: unknown): RunStatus[] | null {
  if (value === undefined || value === null) return null;
  const list: readonly unknown[] = Array.isArray(value) ? value : [value];
  const statuses = list.filter((s): s is string => typeof s === 'string' && (LIST_STATUSES as readonly string[]).includes(s));
  if (list.length === 0 || statuses.length !== list.length) throw invalidRequest(`filter.status must be a list of: ${LIST_STATUSES.join(', ')}`);
  return [...new Set(statuses.flatMap(statusesOfListStatus))];
}

function workflowOf(value: unknown): string | null {
  if (value === undefined || value === null) return null;
  if (!isUuid(value)) throw invalidRequest('filter.workflow must be a UUID');
  return value.toLowerCase();
}

function dateTime(value: unknown, name: string): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string' || !RFC3339.test(value)) throw invalidRequest(`${name} must be a date-time (RFC 3339) such as 2026-01-31T12:00:00Z`);
  return instant(value, name);
}

/** RFC 3339's date-time, as the document's `format: date-time` takes it. */
const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

/** The instants a run can be created at, as far as a filter is concerned: Postgres's years 1 to 9999. */
const EARLIEST = Date.parse('0001-01-01T00:00:00Z');
const LATEST = Date.parse('9999-12-31T23:59:59.999Z');

/**
 * An RFC 3339 date-time (src/domain/date-time.ts; the document's validation refused anything else) as
 * the UTC instant Postgres reads, or null when absent. Converted here because RFC 3339 takes offsets up
 * to ±23:59 and Postgres only up to ±15:59, and clamped to years Postgres writes (no run was created
 * outside them, so the filter means the same).
 */
export function instant(value: string | undefined, name: string): string | null {
  if (value === undefined) return null;
  const read = readDateTime(value);
  if (!read) throw invalidRequest(`${name} ${DATE_TIME_RULE}`);
  const at = read.epochMs;
  if (at < EARLIEST || at > LATEST) return new Date(Math.min(LATEST, Math.max(EARLIEST, at))).toISOString();
  // The fraction is kept as written (Postgres keeps microseconds, a Date milliseconds).
  return `${new Date(at).toISOString().slice(0, 19)}${read.fraction ? `.${read.fraction}` : ''}Z`;
}
