import type { ErrorCode, InputErrorDetail, IntegrationErrorDetail } from './types.ts';

/**
 * A failure the API answered with its error envelope `{ error: { code, message, details? } }`. Branch on
 * `code`; `message` is for humans. `code` is `unexpected_response` when the body was not an envelope
 * (a proxy's HTML page, say).
 */
export class ApiError extends Error {
  override readonly name = 'ApiError';
  constructor(
    readonly status: number,
    readonly code: ErrorCode | 'unexpected_response',
    message: string,
    readonly details: ReadonlyArray<InputErrorDetail | IntegrationErrorDetail> | undefined,
    /** The response's `X-Request-Id`, for support requests. */
    readonly requestId: string | null,
    /** Seconds from `Retry-After` (429), when the server sent it. */
    readonly retryAfterSeconds: number | null = null,
  ) {
    super(message);
  }

  /** Builds the error from a non-2xx response whose body was already parsed (or read as text). */
  static from(response: Response, body: unknown): ApiError {
    const requestId = response.headers.get('x-request-id');
    const retryAfter = parseRetryAfter(response.headers.get('retry-after'));
    const env = (body as { error?: { code?: unknown; message?: unknown; details?: unknown } } | null)?.error;
    if (env && typeof env.code === 'string' && typeof env.message === 'string') {
      const details = Array.isArray(env.details) ? (env.details as Array<InputErrorDetail | IntegrationErrorDetail>) : undefined;
      return new ApiError(response.status, env.code as ErrorCode, env.message, details, requestId, retryAfter);
    }
    const text = typeof body === 'string' ? body.slice(0, 200) : '';
    return new ApiError(response.status, 'unexpected_response', `HTTP ${response.status}${text ? `: ${text}` : ''}`, undefined, requestId, retryAfter);
  }
}

/** The service could not be reached (connection refused, reset, DNS, timeout) after the retries allowed. */
export class ConnectionError extends Error {
  override readonly name = 'ConnectionError';
  constructor(
    readonly url: string,
    override readonly cause: unknown,
  ) {
    super(`cannot reach ${url}: ${describeCause(cause)}`);
  }
}

/** `waitForRun` gave up before the run reached a terminal status (the run goes on). */
export class WaitTimeoutError extends Error {
  override readonly name = 'WaitTimeoutError';
  constructor(
    readonly runId: string,
    readonly lastStatus: string,
  ) {
    super(`run ${runId} is still ${lastStatus}`);
  }
}

/** Seconds from a `Retry-After` header: delta-seconds or an HTTP date. */
export function parseRetryAfter(value: string | null): number | null {
  if (!value) return null;
  const n = Number(value);
  if (Number.isFinite(n) && n >= 0) return n;
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, (at - Date.now()) / 1000);
}

function describeCause(cause: unknown): string {
  const c = cause as { cause?: { code?: string; message?: string }; message?: string } | undefined;
  return c?.cause?.code ?? c?.cause?.message ?? c?.message ?? String(cause);
}
