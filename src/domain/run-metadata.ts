import { invalidRequest } from './errors.ts';
import { countCharacters, isStorableText } from './json-limits.ts';

/**
 * A run's metadata: the caller's labels, sent on `POST /runs` and matched by `GET /runs?metadata[KEY]=VALUE`
 * (docs/design/run-metadata.md). At most MAX_METADATA_KEYS string keys of 1 to MAX_METADATA_KEY
 * characters, each to a string of at most MAX_METADATA_VALUE characters (Unicode code points, as JSON
 * Schema's maxLength counts them). Anything else is 400 `invalid_request` naming the offending key.
 */

export type RunMetadata = Record<string, string>;

export const MAX_METADATA_KEYS = 16;
export const MAX_METADATA_KEY = 64;
export const MAX_METADATA_VALUE = 512;

/** The metadata of a request (`where`: how the request names it), checked; `{}` when absent (null is refused: the document allows none). */
export function checkMetadata(value: unknown, where = 'metadata'): RunMetadata {
  if (value === undefined) return {};
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw invalidRequest(`${where} must be an object of string keys to string values`);
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length > MAX_METADATA_KEYS) {
    const extra = JSON.stringify(entries[MAX_METADATA_KEYS][0]);
    throw invalidRequest(`${where} has ${entries.length} keys (${extra} is the first over the limit); at most ${MAX_METADATA_KEYS} are allowed`);
  }
  for (const [key, entry] of entries) {
    const label = `${where} key ${JSON.stringify(key)}`;
    if (key.length === 0) throw invalidRequest(`${where} keys must not be empty`);
    if (countCharacters(key) > MAX_METADATA_KEY) throw invalidRequest(`${label} is longer than ${MAX_METADATA_KEY} characters`);
    if (typeof entry !== 'string') throw invalidRequest(`${label} must have a string value`);
    if (countCharacters(entry) > MAX_METADATA_VALUE) throw invalidRequest(`the value of ${label} is longer than ${MAX_METADATA_VALUE} characters`);
    if (!isStorableText(key) || !isStorableText(entry)) {
      throw invalidRequest(`${label} must not contain NUL characters or unpaired UTF-16 surrogates`);
    }
  }
  return Object.fromEntries(entries) as RunMetadata;
}
