/** Raw-SQL result values differ by driver (PGlite returns timestamps as text, pg as Date). */
export function isoOrNull(v: unknown): string | null {
  if (v === null || v === undefined) return null;
  const d = v instanceof Date ? v : new Date(String(v).replace(' ', 'T').replace(/\+00$/, 'Z'));
  return d.toISOString();
}

export function dateOrNull(v: unknown): Date | null {
  const iso = isoOrNull(v);
  return iso === null ? null : new Date(iso);
}

/** JSON columns come back parsed from both drivers, but be tolerant of text. */
export function json<T>(v: unknown): T {
  return (typeof v === 'string' ? JSON.parse(v) : v) as T;
}
