/**
 * The error taxonomy. Services throw these; the REST facade maps them once to the spec's envelope
 * (`{ error: { code, message, details? } }`) and GraphQL to its errors' `extensions.code`.
 */

export const ERROR_STATUS = {
  unauthorized: 401,
  insufficient_scope: 403,
  forbidden: 403,
  account_restricted: 403,
  creator_listings_paused: 403,
  not_found: 404,
  method_not_allowed: 405,
  idempotency_conflict: 409,
  integration_connection_required: 409,
  cancel_unavailable: 409,
  not_scheduled: 409,
  spend_cap_reached: 402,
  rate_limited: 429,
  too_many_streams: 429,
  invalid_json: 400,
  missing_workflow: 400,
  invalid_inputs: 400,
  invalid_request: 400,
  invalid_cursor: 400,
  payload_too_large: 413,
  output_too_large: 413,
  unsupported_media_type: 415,
  internal_error: 500,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

/**
 * Codes the spec lists that this service never answers: a run that is not terminal can always be
 * cancelled, so `cancel_unavailable` has no condition here. See
 * docs/design/rules.md#error-codes-the-spec-gives-no-status-for.
 */
export const RESERVED_ERROR_CODES: readonly ErrorCode[] = ['cancel_unavailable'];

export interface InputErrorDetail {
  input: string;
  message: string;
}
export interface IntegrationErrorDetail {
  provider: string;
  providerId: string;
  makesChanges: boolean;
  connectUrl: string;
}

/** A caller's POST /runs window after a request (src/http/headers.ts makes the RateLimit-* headers of it). */
export interface RateLimitState {
  limit: number;
  remaining: number;
  /** Seconds until the oldest counted request leaves the window (when a slot frees up). */
  resetSeconds: number;
}

/** Facts an error carries for its response, beyond the envelope (the HTTP layer turns them into headers). */
export interface ErrorFacts {
  /** When to try again (Retry-After). */
  retryAfterSeconds?: number;
  /** The rate-limit window that refused the request (RateLimit-*). */
  rateLimit?: RateLimitState;
  /** The methods the path allows (Allow). */
  allow?: string[];
}

export class ApiError extends Error {
  readonly code: ErrorCode;
  readonly details?: InputErrorDetail[] | IntegrationErrorDetail[];
  readonly facts: ErrorFacts;

  constructor(code: ErrorCode, message: string, opts: { details?: InputErrorDetail[] | IntegrationErrorDetail[]; cause?: unknown } & ErrorFacts = {}) {
    super(message, { cause: opts.cause });
    this.name = 'ApiError';
    this.code = code;
    this.details = opts.details;
    this.facts = { retryAfterSeconds: opts.retryAfterSeconds, rateLimit: opts.rateLimit, allow: opts.allow };
  }

  get status(): number {
    return ERROR_STATUS[this.code];
  }
}

/**
 * A request answered before its body arrived: too slow (408, code `invalid_request`, as node:http's own
 * 408 for slow headers) or one too many of its key's bodies on their way (429 `rate_limited`). It is
 * counted nowhere (no rate window, no run) and its connection is closed with the answer.
 */
export class UnreceivedBody extends ApiError {
  static timedOut(seconds: number): UnreceivedBody {
    return new UnreceivedBody('invalid_request', `the request body did not arrive within ${seconds} s`, 408);
  }

  static tooMany(limit: number): UnreceivedBody {
    return new UnreceivedBody('rate_limited', `this caller already has ${limit} request bodies on their way; retry in 1 s`, 429, { retryAfterSeconds: 1 });
  }

  private constructor(
    code: 'invalid_request' | 'rate_limited',
    message: string,
    private readonly answered: number,
    facts: ErrorFacts = {},
  ) {
    super(code, message, facts);
  }

  override get status(): number {
    return this.answered;
  }
}

/** The spec's `error` member of an error: code, message and, for the codes that carry them, details. */
export function errorBody(e: ApiError): { code: ErrorCode; message: string; details?: InputErrorDetail[] | IntegrationErrorDetail[] } {
  const withDetails = e.details && (e.code === 'invalid_inputs' || e.code === 'integration_connection_required');
  return { code: e.code, message: e.message, ...(withDetails ? { details: e.details } : {}) };
}

export const notFound = (what: string) => new ApiError('not_found', `${what} not found`);
export const forbidden = (message = 'you are not allowed to use this resource') => new ApiError('forbidden', message);
export const invalidRequest = (message: string) => new ApiError('invalid_request', message);
/** At most this many `details` items: a 1 MiB body of unknown keys would otherwise answer ~11 MiB. */
export const MAX_ERROR_DETAILS = 100;
export const invalidInputs = (details: InputErrorDetail[]) =>
  new ApiError(
    'invalid_inputs',
    details.length === 1
      ? details[0].message
      : `${details.length} inputs are invalid${details.length > MAX_ERROR_DETAILS ? `; the first ${MAX_ERROR_DETAILS} are listed` : ''}`,
    { details: details.slice(0, MAX_ERROR_DETAILS) },
  );
