/**
 * RFC 3339 `date-time` (section 5.6), as JSON Schema's `date-time` format means it, read strictly: a
 * `T` (or `t`) between date and time, seconds always written, an offset `Z` or `±hh:mm` (never `±hh` or
 * `±hhmm`), a real calendar day. A leap second (`:60`) is taken where one can occur, the last minute of
 * a UTC day, and read as the next day's first instant (as Postgres reads it). The request validation
 * (`format: date-time`) and the filters that read the instant both use this, so a value is refused
 * once, in the same words.
 */

export const DATE_TIME_RULE = 'must be a date-time (RFC 3339) such as 2026-01-31T12:00:00Z';

const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

const DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
const isLeapYear = (y: number) => y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0);

const MINUTE = 60_000;
const DAY_MINUTES = 24 * 60;

export interface DateTimeParts {
  /** Milliseconds since the epoch of the instant, to the whole second (a leap second: the next day's first). */
  epochMs: number;
  /** The fraction of the second as written (digits after the point), or '' when none. */
  fraction: string;
}

/** The instant an RFC 3339 date-time names, or null when `text` is not one. */
export function readDateTime(text: string): DateTimeParts | null {
  const m = DATE_TIME.exec(text);
  if (!m) return null;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const fraction = m[7]?.slice(1) ?? '';
  const sign = m[9] === '-' ? -1 : 1;
  const offsetHours = m[10] === undefined ? 0 : Number(m[10]);
  const offsetMinutes = m[11] === undefined ? 0 : Number(m[11]);
  const daysInMonth = month === 2 && isLeapYear(year) ? 29 : DAYS[month - 1];
  if (daysInMonth === undefined || day < 1 || day > daysInMonth) return null;
  if (hour > 23 || minute > 59 || second > 60 || offsetHours > 23 || offsetMinutes > 59) return null;
  const offset = sign * (offsetHours * 60 + offsetMinutes);
  const utcMinuteOfDay = (((hour * 60 + minute - offset) % DAY_MINUTES) + DAY_MINUTES) % DAY_MINUTES;
  if (second === 60 && utcMinuteOfDay !== DAY_MINUTES - 1) return null;
  // Date.UTC takes years 0..99 as 1900..1999: the year is set apart, before a leap second rolls the day over.
  const at = new Date(Date.UTC(2000, month - 1, day, hour, minute));
  at.setUTCFullYear(year);
  return { epochMs: at.getTime() + second * 1000 - offset * MINUTE, fraction };
}

export const isDateTime = (text: string): boolean => readDateTime(text) !== null;
