import type { ApiError, RateLimitState } from '../domain/errors.ts';

/** Response headers, built here from what services and errors report (no layer below http/ names a header). */

/** RateLimit-Limit / -Remaining / -Reset of a POST /runs window (openapi/openapi.yaml). */
export function rateLimitHeaders(d: RateLimitState): Record<string, string> {
  return { 'RateLimit-Limit': String(d.limit), 'RateLimit-Remaining': String(d.remaining), 'RateLimit-Reset': String(d.resetSeconds) };
}

/**
 * RateLimit-Policy and RateLimit (the IETF RateLimit header fields draft) naming both limits of a batch:
 * `requests`, its key's request window, and `runs`, its key's run budget (docs/design/batch-runs.md#run-budget).
 */
export function batchRateHeaders(requests: RateLimitState, runs: RateLimitState): Record<string, string> {
  return {
    ...rateLimitHeaders(requests),
    'RateLimit-Policy': `"requests";q=${requests.limit};w=60, "runs";q=${runs.limit};w=60`,
    RateLimit: `"requests";r=${requests.remaining};t=${requests.resetSeconds}, "runs";r=${runs.remaining};t=${runs.resetSeconds}`,
  };
}

/** The headers an error's facts ask for: Retry-After, RateLimit-*, Allow. */
export function errorHeaders(e: ApiError): Record<string, string> {
  const h: Record<string, string> = {};
  if (e.facts.retryAfterSeconds !== undefined) h['Retry-After'] = String(e.facts.retryAfterSeconds);
  if (e.facts.rateLimit) Object.assign(h, rateLimitHeaders(e.facts.rateLimit));
  if (e.facts.allow) h.Allow = e.facts.allow.join(', ');
  return h;
}
