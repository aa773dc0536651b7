/**
 * The durations of `Cancel-After` and `Start-After`: a whole number without leading zeros (at most six
 * digits) and one unit letter, e.g. `30s`, `5m`, `2h`, `7d`. Each header takes its own units and bound.
 */

export const SECONDS_PER_UNIT = { s: 1, m: 60, h: 3600, d: 86_400 } as const;
export type DurationUnit = keyof typeof SECONDS_PER_UNIT;

/** `text` in seconds when it is a duration in one of `units`, else null (its bound is the caller's). */
export function durationSeconds(text: string, units: readonly DurationUnit[]): number | null {
  const parsed = /^([1-9][0-9]{0,5})([a-z])$/.exec(text);
  const unit = parsed?.[2] as DurationUnit | undefined;
  return parsed && unit && units.includes(unit) ? Number(parsed[1]) * SECONDS_PER_UNIT[unit] : null;
}
