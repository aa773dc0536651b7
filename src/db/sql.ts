/** Raw-SQL result values differ by driver (PGlite returns timestamps as text, pg as Date). */
export function isoOrNull(v: unknown): string | null {
  if (v === null || v === undefined) return null;
  if (typeof v === 'string') {
    const iso = utcTextToIso(v);
    if (iso !== null) return iso;
  }
  const d = v instanceof Date ? v : new Date(String(v).replace(' ', 'T').replace(/\+00$/, 'Z'));
  return d.toISOString();
}

/** Postgres's text of a timestamptz in UTC: `2026-11-24 22:33:21.123456+00` (fraction optional, up to 6 digits). */
const UTC_TEXT = /^(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?\+00$/;

/**
 * What `new Date(…).toISOString()` makes of a valid UTC timestamp text, without the Date (every timestamp
 * of every row read goes through here): the fraction truncated to milliseconds, as Date does. Null for
 * anything else (another offset, an out-of-range field that Date would roll over or reject).
 */
function utcTextToIso(s: string): string | null {
  const m = UTC_TEXT.exec(s);
  if (!m) return null;
  const year = Number(m[1]);
  const month = Number(m[2]);
  const day = Number(m[3]);
  if (month < 1 || month > 12 || day < 1 || Number(m[4]) > 23 || Number(m[5]) > 59 || Number(m[6]) > 59) return null;
  if (day > 28 && day > daysInMonth(year, month)) return null;
  const ms = m[7] === undefined ? '000' : `${m[7]}00`.slice(0, 3);
  return `${m[1]}-${m[2]}-${m[3]}T${m[4]}:${m[5]}:${m[6]}.${ms}Z`;
}

function daysInMonth(year: number, month: number): number {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}

export function dateOrNull(v: unknown): Date | null {
  const iso = isoOrNull(v);
  return iso === null ? null : new Date(iso);
}

/** JSON columns come back parsed from both drivers, but be tolerant of text. */
export function json<T>(v: unknown): T {
  return (typeof v === 'string' ? JSON.parse(v) : v) as T;
}
