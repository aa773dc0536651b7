import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { DIST, outputIsStale, ROOT } from './output.ts';

/**
 * `npm start` and `npm run worker`: `node src/build/start.ts src/main.js` builds when dist/ is missing
 * or older than its sources (src/build/build.ts, in a child process so webpack and tsc leave nothing in
 * this one), then runs the compiled module in this process. The npm script execs node, so npm's child
 * is this process and a SIGTERM npm forwards reaches the service. In production run the output
 * directly: `node dist/src/main.js` (docs/operations.md).
 */

const entry = process.argv[2];
if (!entry) {
  console.error('usage: node src/build/start.ts src/main.js');
  process.exit(2);
}
if (outputIsStale()) {
  console.error('dist/ is missing or older than the sources: building (npm run build)');
  const built = spawnSync(process.execPath, [join(ROOT, 'src', 'build', 'build.ts')], { cwd: ROOT, stdio: 'inherit' });
  if (built.status !== 0) process.exit(built.status ?? 1);
}
await import(pathToFileURL(join(DIST, entry)).href);
