/**
 * Limits on request JSON that is processed recursively (fingerprints, input coercion) and stored as
 * Postgres jsonb/text: nesting deeper than MAX_JSON_DEPTH would overflow the stack of recursive code,
 * and NUL characters or unpaired UTF-16 surrogates are rejected by Postgres (jsonb and text), which
 * would turn a bad request into a 500. Iterative, so any depth is checked safely.
 */

export const MAX_JSON_DEPTH = 64;

// A NUL, a high surrogate not followed by a low one, or a low surrogate not preceded by a high one.
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Whether a string can be stored in Postgres text/jsonb (no NUL, no unpaired surrogate). */
export function isStorableText(s: string): boolean {
  return !UNSTORABLE.test(s);
}

/** A text's length in Unicode code points, as JSON Schema's maxLength counts it. */
export function countCharacters(text: string): number {
  let n = text.length;
  // A pair of UTF-16 surrogates is one character.
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      n--;
      i++;
    }
  }
  return n;
}

/** A buyer-safe description of why `value` (parsed JSON) breaks those limits, or null when it does not. */
export function jsonLimitProblem(value: unknown, maxDepth = MAX_JSON_DEPTH): string | null {
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length) {
    const [v, depth] = stack.pop()!;
    if (typeof v === 'string') {
      if (!isStorableText(v)) return 'strings in the request body must not contain NUL characters or unpaired UTF-16 surrogates';
      continue;
    }
    if (v === null || typeof v !== 'object') continue;
    if (depth > maxDepth) return `the request body is nested more than ${maxDepth} levels deep`;
    if (Array.isArray(v)) {
      for (const item of v) stack.push([item, depth + 1]);
    } else {
      for (const [k, item] of Object.entries(v as Record<string, unknown>)) {
        if (!isStorableText(k)) return 'strings in the request body must not contain NUL characters or unpaired UTF-16 surrogates';
        stack.push([item, depth + 1]);
      }
    }
  }
  return null;
}
