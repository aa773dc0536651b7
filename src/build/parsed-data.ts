import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';

/**
 * YAML the service parses at every start, shipped by `npm run build` as JSON beside its source (the
 * compiled service reads the JSON, src/http/rest/rest-adapter.ts; run from source it reads the YAML).
 * Plain node runs this file (src/build/output.ts), so only erasable TypeScript here.
 */
export const PARSED_AT_START = [{ yaml: 'openapi/openapi.yaml', json: 'openapi/openapi.json' }];

/** Writes each document of PARSED_AT_START read from `root` as JSON under `out`. */
export function writeParsedData(root: string, out: string): void {
  for (const { yaml, json } of PARSED_AT_START) writeFileSync(join(out, json), JSON.stringify(parse(readFileSync(join(root, yaml), 'utf8'))));
}
