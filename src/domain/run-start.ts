import { durationSeconds } from './duration.ts';
import { type ApiError, invalidRequest } from './errors.ts';
import { DATE_TIME_RULE, readDateTime } from './date-time.ts';

/**
 * A run's delayed start (docs/design/flow-control.md): the `Start-After` header of `POST /runs` and
 * `POST /runs/batch` (a whole number of seconds, minutes, hours or days, as `Cancel-After` writes
 * durations, up to MAX_START_DELAY_SECONDS) or an item's body field `startAt` (an RFC 3339 instant at
 * most that far ahead). A start at or before now is no delay: the run is queued at once.
 */

export const MAX_START_DELAY_SECONDS = 7 * 24 * 60 * 60;

/**
 * The values Start-After takes, as one pattern (the OpenAPI document states it for the header; a test
 * holds the two equal): 1–604800 s, 1–10080 m, 1–168 h, 1–7 d, without leading zeros.
 */
export const START_AFTER_PATTERN =
  '^(?:[1-7]d|(?:[1-9][0-9]?|1[0-5][0-9]|16[0-8])h|(?:[1-9][0-9]{0,3}|100[0-7][0-9]|10080)m|' +
  '(?:[1-9][0-9]{0,4}|[1-5][0-9]{5}|60[0-3][0-9]{3}|604[0-7][0-9]{2}|604800)s)$';

/** The header's delay in seconds, or null when it is absent; 400 `invalid_request` when malformed or over 7 days. */
export function startAfterSeconds(header: string | undefined): number | null {
  if (header === undefined) return null;
  const seconds = secondsOf(header);
  if (seconds === null || seconds > MAX_START_DELAY_SECONDS) throw startAfterRefusal(header);
  return seconds;
}

/** Why `header` is not a Start-After value (also the REST facade's answer when the document's pattern refuses it). */
export function startAfterRefusal(header: string): ApiError {
  return secondsOf(header) === null
    ? invalidRequest('Start-After must be a duration such as 30s, 10m, 2h or 7d (a whole number of seconds, minutes, hours or days)')
    : invalidRequest('Start-After must be at most 7 days (7d, 168h, 10080m or 604800s)');
}

const secondsOf = (header: string): number | null => durationSeconds(header, ['s', 'm', 'h', 'd']);

/**
 * A `startAt` value (body of POST /runs, a batch item, POST /runs/{id}/reschedule) as epoch ms, or null
 * when absent; 400 `invalid_request` naming `field` when it is not an RFC 3339 instant or lies more than
 * 7 days after `nowMs`.
 */
export function readStartAt(value: unknown, nowMs: number, field = 'startAt'): number | null {
  if (value === undefined) return null;
  const parts = typeof value === 'string' ? readDateTime(value) : null;
  if (!parts) throw invalidRequest(`"${field}" ${DATE_TIME_RULE}`);
  const at = parts.epochMs + Number(`0.${parts.fraction || '0'}`.slice(0, 5)) * 1000;
  if (at - nowMs > MAX_START_DELAY_SECONDS * 1000) throw invalidRequest(`"${field}" must be at most 7 days ahead`);
  return at;
}

/**
 * The instant (epoch ms) a run starts from its header delay and body instant, or null: at once. Both
 * given is ambiguous and refused.
 */
export function startInstant(headerSeconds: number | null, bodyAt: number | null, nowMs: number): number | null {
  if (headerSeconds !== null && bodyAt !== null) throw invalidRequest('give either the Start-After header or "startAt", not both');
  const at = bodyAt ?? (headerSeconds === null ? null : nowMs + headerSeconds * 1000);
  return at !== null && at > nowMs ? at : null;
}
