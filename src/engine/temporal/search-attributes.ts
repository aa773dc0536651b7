import type { ConnectionLike } from '@temporalio/client';
import { searchAttributes } from '../../../workflows/definitions.ts';

/**
 * The run workflow's custom search attributes (workflows/definitions.ts) registered on a namespace.
 * Idempotent: only the missing ones are added, so a fresh dev server (or a new namespace) just works
 * and a server that already has them is left alone.
 */

type IndexedValueType = NonNullable<Parameters<ConnectionLike['operatorService']['addSearchAttributes']>[0]['searchAttributes']>[string];
/** temporal.api.enums.v1.IndexedValueType's KEYWORD: the SDK exports its encoding only from private files. */
const KEYWORD = 2 as IndexedValueType;

export const SEARCH_ATTRIBUTE_NAMES: readonly string[] = Object.values(searchAttributes).map((k) => k.name);

/** `--search-attribute NAME=Keyword` arguments for `temporal server start-dev`. */
export function devServerSearchAttributeArgs(): string[] {
  return SEARCH_ATTRIBUTE_NAMES.flatMap((name) => ['--search-attribute', `${name}=Keyword`]);
}

/** Adds the missing attributes; returns the names it added. */
export async function ensureSearchAttributes(connection: Pick<ConnectionLike, 'operatorService'>, namespace: string): Promise<string[]> {
  const existing = await connection.operatorService.listSearchAttributes({ namespace });
  const known = new Set(Object.keys(existing.customAttributes ?? {}));
  const missing = SEARCH_ATTRIBUTE_NAMES.filter((name) => !known.has(name));
  if (missing.length === 0) return [];
  await connection.operatorService.addSearchAttributes({
    namespace,
    searchAttributes: Object.fromEntries(missing.map((name) => [name, KEYWORD])),
  });
  return missing;
}
