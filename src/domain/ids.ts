import { randomUUID } from 'node:crypto';

/** A UUID in its text form, any case. */
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The one UUID check (path ids, cursors, catalog references). */
export function isUuid(v: unknown): v is string {
  return typeof v === 'string' && UUID.test(v);
}

/**
 * A time-ordered UUID (RFC 9562 version 7): the first 48 bits are the Unix time in milliseconds, the
 * rest random. Rows keyed by one are inserted at the right edge of their primary key and can be found
 * by age through it (idempotency records: src/sql/idempotency-records.ts). Built on randomUUID (its
 * variant bits and randomness, far cheaper per call than a v7 library's), its version nibble replaced.
 */
export function timeOrderedUuid(ms = Date.now()): string {
  return `${timePrefix(ms)}7${randomUUID().slice(15)}`;
}

/** The least UUID whose first 48 bits are `ms` (Postgres orders uuids bytewise): every timeOrderedUuid of an earlier millisecond sorts below it. */
export function uuidAtTime(ms: number): string {
  return `${timePrefix(ms)}0000-0000-000000000000`;
}

/** The first two groups of a UUID (and the hyphen after them) holding `ms` in 48 bits. */
function timePrefix(ms: number): string {
  const t = Math.max(0, Math.floor(ms)).toString(16).padStart(12, '0');
  return `${t.slice(0, 8)}-${t.slice(8, 12)}-`;
}
