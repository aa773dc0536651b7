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

/**
 * A page request with its defaults. The REST document states the ranges (offset 0..2^53−1, limit
 * 1..50) and openapi-backend refuses anything else before a service is called (src/http/rest).
 */
export function pageOf(offset: number | undefined, limit: number | undefined): Page {
  return { offset: offset ?? 0, limit: limit ?? DEFAULT_LIMIT };
}
