// pg's own conversion of a parameter to its text (dates, buffers, objects as JSON, toPostgres).
// @ts-expect-error pg/lib/utils has no type declarations
import { prepareValue as pgPrepareValue } from 'pg/lib/utils.js';

const prepareValue = pgPrepareValue as (v: unknown) => unknown;

/** A JS array as the Postgres array literal pg sends for it (elements quoted, null as NULL, objects as JSON). */
export const pgArrayText = (values: readonly unknown[]): string => String(prepareValue(values));

/**
 * A parameter as an untyped SQL literal, for `EXECUTE <name>(<literals>)` (src/db/prepared.ts): the text
 * pg would send for it, quoted as pg's `escapeLiteral` quotes it (an `E''` literal when it holds a
 * backslash), byte for byte. pg builds both strings a character at a time; the settlement's event
 * arrays made that a visible share of the service's CPU, so the common cases take native `replaceAll`.
 */
export function sqlLiteral(v: unknown): string {
  if (v === null || v === undefined) return 'null';
  const text = typeof v === 'string' ? v : ((Array.isArray(v) ? arrayText(v) : null) ?? String(prepareValue(v)));
  return quoted(text);
}

/**
 * A parameter as the text (or bytes) pg's extended protocol binds for it, for statements bound outside
 * pg's own Query (src/db/pipeline.ts): null, a string as it is, an array through the same fast path as
 * sqlLiteral, anything else through pg's prepareValue.
 */
export function paramText(v: unknown): string | Buffer | null {
  if (v === null || v === undefined) return null;
  if (typeof v === 'string') return v;
  const text = (Array.isArray(v) ? arrayText(v) : null) ?? prepareValue(v);
  return text === null || text === undefined || Buffer.isBuffer(text) ? (text ?? null) : String(text);
}

function quoted(s: string): string {
  const doubled = s.includes("'") ? s.replaceAll("'", "''") : s;
  return s.includes('\\') ? ` E'${doubled.replaceAll('\\', '\\\\')}'` : `'${doubled}'`;
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
