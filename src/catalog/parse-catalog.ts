import { parse, YAMLParseError } from 'yaml';
import { canonicalJson } from '../domain/canonical-json.ts';
import { sha256 } from '../security/crypto.ts';
import { catalogSchema, checkCatalog, formatIssues, type Catalog } from './schema.ts';

/** Reading a catalog file (docs/design/catalog.md): parsing, schema and cross-reference checks. */

export class CatalogError extends Error {
  readonly code = 'catalog_invalid';
  constructor(
    readonly issues: string[],
    source = 'catalog',
  ) {
    super(`${source} is invalid:\n  - ${issues.join('\n  - ')}`);
    this.name = 'CatalogError';
  }
}

/** Parses and checks a catalog (YAML or JSON). Throws CatalogError listing every problem by path. */
export function parseCatalog(text: string, sourceName = 'catalog'): Catalog {
  let raw: unknown;
  try {
    raw = parse(text, { prettyErrors: true, uniqueKeys: true });
  } catch (e) {
    const where = e instanceof YAMLParseError && e.linePos ? ` (line ${e.linePos[0].line}, column ${e.linePos[0].col})` : '';
    throw new CatalogError([`(root): not valid YAML${where}: ${(e as Error).message.split('\n')[0]}`], sourceName);
  }
  if (raw === null || raw === undefined) raw = {};
  const parsed = catalogSchema.safeParse(raw, { reportInput: true });
  if (!parsed.success) throw new CatalogError(formatIssues(parsed.error), sourceName);
  const catalog: Catalog = { ...parsed.data, source: sourceName };
  const issues = checkCatalog(catalog);
  if (issues.length) throw new CatalogError(issues, sourceName);
  return catalog;
}

/** sha256 of the graph's canonical JSON (keys sorted): equal graphs hash equal whatever the key order. */
export function canonicalGraphHash(graph: unknown): string {
  return sha256(canonicalJson(graph));
}
