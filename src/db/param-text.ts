// pg's own conversion of a parameter to its text (dates, buffers, objects as JSON, toPostgres).
// @ts-expect-error pg/lib/utils has no type declarations
import { prepareValue as pgPrepareValue } from 'pg/lib/utils.js';

const prepareValue = pgPrepareValue as (v: unknown) => unknown;

/** A JS array as the Postgres array literal pg sends for it (elements quoted, null as NULL, objects as JSON). */
export const pgArrayText = (values: readonly unknown[]): string => String(prepareValue(values));

/**
 * A parameter as the text (or bytes) pg's extended protocol binds for it, for statements bound outside
 * pg's own Query (src/db/pipeline.ts): byte for byte what pg's prepareValue gives. pg builds an array's
 * text a character at a time; the settlement's event arrays made that a visible share of the service's
 * CPU, so arrays take the native-`replaceAll` path below, and a string is sent as it is.
 */
export function paramText(v: unknown): string | Buffer | null {
  if (v === null || v === undefined) return null;
  if (typeof v === 'string') return v;
  return (Array.isArray(v) ? arrayText(v) : null) ?? (prepareValue(v) as string | Buffer | null);
}

/**
 * pg's arrayString: a Postgres array literal, elements converted as pg converts them; null for an
 * element pg does not turn into text (a toPostgres giving null or a Buffer), left to pg's own path.
 */
function arrayText(val: readonly unknown[]): string | null {
  let out = '{';
  for (let i = 0; i < val.length; i++) {
    if (i > 0) out += ',';
    const item = val[i];
    if (item === null || item === undefined) out += 'NULL';
    else if (Array.isArray(item)) {
      const inner = arrayText(item);
      if (inner === null) return null;
      out += inner;
    } else if (ArrayBuffer.isView(item)) {
      const b = item instanceof Buffer ? item : Buffer.from(item.buffer, item.byteOffset, item.byteLength);
      out += '\\\\x' + b.toString('hex');
    } else {
      const text = typeof item === 'string' ? item : prepareValue(item);
      if (typeof text !== 'string') return null;
      out += element(text);
    }
  }
  return out + '}';
}

function element(s: string): string {
  const slashes = s.includes('\\') ? s.replaceAll('\\', '\\\\') : s;
  return `"${slashes.includes('"') ? slashes.replaceAll('"', '\\"') : slashes}"`;
}
