import { invalidRequest } from './errors.ts';

/**
 * The `Cancel-After` header of `POST /runs` (docs/design/run-metadata.md#deadline): a whole number of
 * seconds, minutes or hours (`30s`, `5m`, `1h`), from 1 second to MAX_CANCEL_AFTER_SECONDS. Past it a run
 * that has not ended is cancelled as `POST /runs/{id}/cancel` would cancel it.
 */

export const MAX_CANCEL_AFTER_SECONDS = 24 * 60 * 60;
const UNIT_SECONDS: Record<string, number> = { s: 1, m: 60, h: 3600 };

/** The header's duration in seconds, or null when it is absent; 400 `invalid_request` when it is malformed or too long. */
export function cancelAfterSeconds(header: string | undefined): number | null {
  if (header === undefined) return null;
  const parsed = /^\s*([0-9]{1,6})([smh])\s*$/.exec(header);
  const seconds = parsed ? Number(parsed[1]) * UNIT_SECONDS[parsed[2]!]! : NaN;
  if (!(seconds >= 1)) throw invalidRequest('Cancel-After must be a duration such as 30s, 5m or 1h (a whole number of seconds, minutes or hours)');
  if (seconds > MAX_CANCEL_AFTER_SECONDS) throw invalidRequest('Cancel-After must be at most 24 hours (24h, 1440m or 86400s)');
  return seconds;
}
