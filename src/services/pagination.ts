import { invalidRequest } from '../domain/errors.ts';

export interface Page {
  offset: number;
  limit: number;
}
export interface PaginationOut {
  offset: number;
  limit: number;
  hasMore: boolean;
}

export const DEFAULT_LIMIT = 20;
export const MAX_LIMIT = 50;

/** Checks a page request from any adapter: offset ≥ 0, limit 1..50 (default 20). */
export function checkPage(offset: number | undefined, limit: number | undefined): Page {
  const o = offset ?? 0;
  const l = limit ?? DEFAULT_LIMIT;
  if (!Number.isSafeInteger(o) || o < 0) throw invalidRequest('offset must be an integer >= 0');
  if (!Number.isSafeInteger(l) || l < 1 || l > MAX_LIMIT) throw invalidRequest(`limit must be an integer from 1 to ${MAX_LIMIT}`);
  return { offset: o, limit: l };
}

/** Parses a query-string integer strictly ("10", not "10abc", "1e1" or " 10"). */
export function parseIntParam(name: string, raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  if (!/^(0|[1-9]\d{0,15})$/.test(raw)) throw invalidRequest(`${name} must be a non-negative integer`);
  return Number(raw);
}
