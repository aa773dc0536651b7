import { durationSeconds } from './duration.ts';
import { type ApiError, invalidRequest } from './errors.ts';

/**
 * The `Cancel-After` header of `POST /runs` (docs/design/run-metadata.md#deadline): a whole number of
 * seconds, minutes or hours (`30s`, `5m`, `1h`), from 1 second to MAX_CANCEL_AFTER_SECONDS. Past it a run
 * that has not ended is cancelled as `POST /runs/{id}/cancel` would cancel it.
 */

export const MAX_CANCEL_AFTER_SECONDS = 24 * 60 * 60;

/**
 * The values cancelAfterSeconds takes, as one pattern: the OpenAPI document states it for the header, so
 * that what a client or a fuzzer reads there is exactly what is accepted (test/unit/openapi-document.test.ts
 * holds the two equal). 1–86400 s, 1–1440 m, 1–24 h, without leading zeros.
 */
export const CANCEL_AFTER_PATTERN =
  '^(?:(?:[1-9]|1[0-9]|2[0-4])h|(?:[1-9][0-9]{0,2}|1[0-3][0-9]{2}|14[0-3][0-9]|1440)m|' +
  '(?:[1-9][0-9]{0,3}|[1-7][0-9]{4}|8[0-5][0-9]{3}|86[0-3][0-9]{2}|86400)s)$';

/** The header's duration in seconds, or null when it is absent; 400 `invalid_request` when it is malformed or too long. */
export function cancelAfterSeconds(header: string | undefined): number | null {
  if (header === undefined) return null;
  const seconds = secondsOf(header);
  if (seconds === null || seconds > MAX_CANCEL_AFTER_SECONDS) throw cancelAfterRefusal(header);
  return seconds;
}

/** Why `header` is not a Cancel-After value (also what the REST facade answers when the document's pattern refuses it). */
export function cancelAfterRefusal(header: string): ApiError {
  return secondsOf(header) === null
    ? invalidRequest('Cancel-After must be a duration such as 30s, 5m or 1h (a whole number of seconds, minutes or hours)')
    : invalidRequest('Cancel-After must be at most 24 hours (24h, 1440m or 86400s)');
}

const secondsOf = (header: string): number | null => durationSeconds(header, ['s', 'm', 'h']);
