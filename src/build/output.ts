import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
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
const EXCLUDED = ['src/client', 'src/build'];
/**
 * Node options of every production start (`npm start`, `npm run worker`, the image's entry point).
 * V8 grows the young generation to its default ceiling while the start loads modules and then keeps it
 * committed, though an idle process uses little of it; a lower ceiling keeps that out of the idle RSS
 * without a measurable cost per request. V8's compilation cache keeps every script it compiled, with
 * its source, after nothing else uses it: the CommonJS modules of the Temporal SDK, whose top-level
 * code runs once, and the copy of the workflow bundle the SDK compiles in the main thread at a worker's
 * start. It saves work only when the same source is compiled again (a repeated `new Function`), which
 * no request or run was found to do; off, no cost per request or per run stood out of the bench's
 * noise (docs/performance.md, "The process").
 */
export const NODE_FLAGS = ['--max-semi-space-size=8', '--no-compilation-cache'];
/**
 * Environment of every production start, set before node starts (glibc reads it once, at the process's
 * first allocation): `npm start` and `npm run worker` run `exec env … node`, the image sets it with ENV.
 * glibc gives threads that allocate at once arenas of their own, up to eight per core, and each keeps
 * pages it freed; with the Temporal worker (the SDK's Rust threads, the workflow thread) that is MiBs of
 * idle RSS. Two arenas cost no throughput the bench sees (docs/performance.md, "The process").
 */
export const START_ENV: Record<string, string> = { MALLOC_ARENA_MAX: '2' };
const INPUT_FILES = ['package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json'];

/** Every file under `root`/`dir` (and, with `withFolders`, every folder, `dir` first), skipping EXCLUDED. */
export function* filesUnder(root: string, dir: string, withFolders = false): Generator<string> {
  const top = join(root, dir);
  if (withFolders) yield top;
  for (const entry of readdirSync(top, { withFileTypes: true })) {
    const path = join(top, entry.name);
    if (EXCLUDED.includes(relative(root, path))) continue;
    if (entry.isDirectory()) yield* filesUnder(root, relative(root, path), withFolders);
    else if (entry.isFile()) yield path;
  }
}

function modified(path: string): number {
  return statSync(path, { throwIfNoEntry: false })?.mtimeMs ?? 0;
}

/**
 * True when `root` has no complete build or any input is newer than it: a file, or a folder (deleting
 * or renaming a file changes its folder's mtime). A stat per entry (a few hundred), no hashing: cheap
 * enough for every `npm start`.
 */
export function outputIsStale(root = ROOT): boolean {
  const built = modified(join(root, relative(ROOT, STAMP)));
  if (!built) return true;
  for (const file of INPUT_FILES) if (modified(join(root, file)) > built) return true;
  for (const dir of [...SOURCE_DIRS, ...DATA_DIRS]) {
    for (const path of filesUnder(root, dir, true)) if (modified(path) > built) return true;
  }
  return false;
}
