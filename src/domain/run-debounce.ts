import { durationSeconds } from './duration.ts';
import { invalidRequest } from './errors.ts';
import { MAX_START_DELAY_SECONDS } from './run-start.ts';

/**
 * The `debounce` field of a run to start (docs/design/flow-control.md#debounce): `{"key", "delay",
 * "maxDelay"}`, trailing. `key` names the burst (1 to 128 characters, scoped to the account and the
 * workflow version); `delay` and `maxDelay` are durations as `Start-After` writes them, 1 s ≤ delay ≤
 * maxDelay ≤ 7 days. maxDelay is required: without it a steady stream of calls would postpone the run
 * for ever.
 */

export interface RunDebounce {
  key: string;
  delaySeconds: number;
  maxDelaySeconds: number;
}

export const MAX_DEBOUNCE_KEY_LENGTH = 128;

/** The field checked, or null when absent; 400 `invalid_request` naming what is wrong. */
export function readDebounce(value: unknown): RunDebounce | null {
  if (value === undefined) return null;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw invalidRequest('"debounce" must be an object {"key", "delay", "maxDelay"}');
  }
  const { key, delay, maxDelay, ...rest } = value as Record<string, unknown>;
  const unknown = Object.keys(rest);
  if (unknown.length) throw invalidRequest(`"debounce" has an unknown field "${unknown[0]}"; it takes "key", "delay" and "maxDelay"`);
  if (typeof key !== 'string' || key.length === 0 || [...key].length > MAX_DEBOUNCE_KEY_LENGTH) {
    throw invalidRequest(`"debounce.key" must be a string of 1 to ${MAX_DEBOUNCE_KEY_LENGTH} characters`);
  }
  const delaySeconds = duration(delay, 'delay');
  const maxDelaySeconds = duration(maxDelay, 'maxDelay');
  if (maxDelaySeconds < delaySeconds) throw invalidRequest('"debounce.maxDelay" must be at least "debounce.delay"');
  return { key, delaySeconds, maxDelaySeconds };
}

function duration(value: unknown, field: string): number {
  const seconds = typeof value === 'string' ? durationSeconds(value, ['s', 'm', 'h', 'd']) : null;
  if (seconds === null || seconds > MAX_START_DELAY_SECONDS) {
    throw invalidRequest(`"debounce.${field}" must be a duration such as 5s, 10m or 2h, at most 7 days`);
  }
  return seconds;
}
