/** A UUID in its text form, any case. */
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The one UUID check (path ids, cursors, catalog references). */
export function isUuid(v: unknown): v is string {
  return typeof v === 'string' && UUID.test(v);
}
