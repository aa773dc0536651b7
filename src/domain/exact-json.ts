/**
 * JSON whose numbers are what the sender wrote (docs/design/rules.md, "Numbers in inputs"). JavaScript
 * holds a JSON number as an IEEE 754 double, so `1e400` would become Infinity (stored as null) and
 * `123456789012345678901234567890` another number. parseJson marks each number whose text the double
 * does not hold exactly as an InexactNumber carrying that text, so the input rules can refuse it by
 * name (src/domain/inputs.ts) instead of running on a value the caller did not send.
 *
 * A number is exact when its decimal value equals that of the double's shortest text (String(n)):
 * `1.0`, `1e2`, `-0` and `0.1` are exact; `0.10000000000000001`, `1e-400` and `2e308` are not.
 */

/** A number of a parsed body that a double does not hold exactly; `source` is its JSON text. */
export class InexactNumber {
  constructor(readonly source: string) {}
}

/**
 * A number token that may be inexact: one with an exponent or 16 or more digits and points. One with at
 * most 15 of them and no exponent has at most 15 significant digits and a magnitude within 1e-14..1e15,
 * which a double always holds exactly. A token follows `:`, `,` or `[` (a body's root number is never
 * an object, so it is refused whatever it holds). Text inside strings may match too: that only costs
 * the careful parse.
 */
const MAYBE_INEXACT = /[:,[][ \t\n\r]*-?(?:[\d.]{16}|[\d.]+[eE])/;

const DECIMAL = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/;

/** A decimal's value as `sign digits e exponent`, with no leading or trailing zero digits (zero: "0"). */
function decimalValue(text: string): string {
  const [, sign = '', whole = '', fraction = '', exponent = '0'] = DECIMAL.exec(text) ?? [];
  let digits = (whole + fraction).replace(/^0+/, '');
  const trimmed = digits.replace(/0+$/, '');
  const scale = Number(exponent) - fraction.length + (digits.length - trimmed.length);
  digits = trimmed;
  return digits === '' ? '0' : `${sign}${digits}e${scale}`;
}

/** Whether the double `value`, parsed from `source`, holds exactly the number `source` writes. */
export function isExactNumber(source: string, value: number): boolean {
  return Number.isFinite(value) && decimalValue(source) === decimalValue(String(value));
}

type Reviver = (this: unknown, key: string, value: unknown, context?: { source?: string }) => unknown;

// V8 leaves the context out for some values of some bodies (seen with long texts of escaped surrogate
// pairs); a number whose text is not given cannot be checked, and is kept as parsed.
const markInexact: Reviver = (_key, value, context) =>
  typeof value === 'number' && context?.source !== undefined && !isExactNumber(context.source, value) ? new InexactNumber(context.source) : value;

/** JSON.parse, with numbers a double does not hold exactly given as InexactNumber; throws as JSON.parse does. */
export function parseJson(text: string): unknown {
  if (!MAYBE_INEXACT.test(text)) return JSON.parse(text);
  let value: unknown;
  try {
    value = JSON.parse(text, markInexact as Parameters<typeof JSON.parse>[1]);
  } catch (err) {
    // The reviver's walk is recursive: nesting too deep for the stack is valid JSON all the same, and
    // far deeper than the body checks allow (src/domain/json-limits.ts), which refuse it by its depth.
    if (err instanceof RangeError) return JSON.parse(text);
    throw err;
  }
  // A root number stays a number: callers that want an object refuse it as they refuse any number.
  return value instanceof InexactNumber ? Number(value.source) : value;
}

/** The first InexactNumber in a parsed value, or null. */
export function inexactNumberIn(value: unknown): InexactNumber | null {
  const stack: unknown[] = [value];
  while (stack.length) {
    const v = stack.pop();
    if (v instanceof InexactNumber) return v;
    if (v !== null && typeof v === 'object') for (const item of Object.values(v)) stack.push(item);
  }
  return null;
}
