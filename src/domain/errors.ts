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
  spend_cap_reached: 402,
  rate_limited: 429,
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

export class ApiError extends Error {
  readonly code: ErrorCode;
  readonly details?: InputErrorDetail[] | IntegrationErrorDetail[];
  /** Extra response headers (Allow, Retry-After…). */
  readonly headers?: Record<string, string>;

  constructor(
    code: ErrorCode,
    message: string,
    opts: { details?: InputErrorDetail[] | IntegrationErrorDetail[]; headers?: Record<string, string>; cause?: unknown } = {},
  ) {
    super(message, { cause: opts.cause });
    this.name = 'ApiError';
    this.code = code;
    this.details = opts.details;
    this.headers = opts.headers;
  }

  get status(): number {
    return ERROR_STATUS[this.code];
  }
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
      ? details[0]!.message
      : `${details.length} inputs are invalid${details.length > MAX_ERROR_DETAILS ? `; the first ${MAX_ERROR_DETAILS} are listed` : ''}`,
    { details: details.slice(0, MAX_ERROR_DETAILS) },
  );
