import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The compiled output (`npm run build`, docs/operations.md "Build and production start") and what it is
 * built from. Run from source with plain node (src/build/start.ts runs before any output exists), so
 * only erasable TypeScript here.
 */

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const DIST = join(ROOT, 'dist');
/** Written last by a build; its mtime is the moment the build started reading its sources. */
export const STAMP = join(DIST, '.built');

/** Folders read at run time by path (the demo catalog, the OpenAPI document); copied into the output so the compiled modules find them. */
export const DATA_DIRS = ['catalog', 'openapi'];
/** Compiled by tsc (tsconfig.build.json); their other files (docs assets) are copied beside the output. */
export const SOURCE_DIRS = ['src', 'workflows'];
/** Not part of the service's output: the client is its own package, src/build runs from source. */
export const EXCLUDED = [join(ROOT, 'src', 'client'), join(ROOT, 'src', 'build')];
const INPUT_FILES = ['package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json'];

/** Every file under `dir`, skipping EXCLUDED. */
export function* filesUnder(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (EXCLUDED.includes(path)) continue;
    if (entry.isDirectory()) yield* filesUnder(path);
    else if (entry.isFile()) yield path;
  }
}

function modified(path: string): number {
  return statSync(path, { throwIfNoEntry: false })?.mtimeMs ?? 0;
}

/**
 * True when there is no complete build or any input is newer than it. A stat per input file (a few
 * hundred), no hashing: cheap enough for every `npm start`.
 */
export function outputIsStale(): boolean {
  const built = modified(STAMP);
  if (!built) return true;
  for (const file of INPUT_FILES) if (modified(join(ROOT, file)) > built) return true;
  for (const dir of [...SOURCE_DIRS, ...DATA_DIRS]) {
    for (const file of filesUnder(join(ROOT, dir))) if (modified(file) > built) return true;
  }
  return false;
}
