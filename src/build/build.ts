import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, renameSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { bundleWorkflows } from '../engine/temporal/workflow-bundle.ts';
import { DATA_DIRS, DIST, filesUnder, ROOT, SOURCE_DIRS, STAMP } from './output.ts';
import { bundleService } from './bundle.ts';
import { writeParsedData } from './parsed-data.ts';

/**
 * `npm run build`: src/ and workflows/ compiled by the project's tsc (tsconfig.build.json), its entry
 * points bundled with the packages they load (src/build/bundle.ts) into dist/, laid out as in the
 * repository (dist/src/main.js), with the files modules read by a path relative to
 * themselves (catalog/, openapi/, the docs page's assets) copied to the same places, the OpenAPI
 * document also as JSON (src/build/parsed-data.ts), and the Temporal workflow bundle
 * (dist/workflow-bundle.js) so no worker runs webpack at start. Built in a
 * folder of its own and moved into place at the end: a process starting meanwhile sees the old output
 * or the new one, never half of one.
 */

export async function build(): Promise<void> {
  const started = new Date();
  const out = join(ROOT, '.tmp', `build-${process.pid}`);
  const compiled = `${out}-tsc`;
  for (const dir of [out, compiled]) {
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
  }
  try {
    const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
    const compiling = spawnSync(process.execPath, [tsc, '-p', join(ROOT, 'tsconfig.build.json'), '--outDir', compiled], { cwd: ROOT, stdio: 'inherit' });
    if (compiling.status !== 0) throw new Error(`tsc failed (exit ${compiling.status ?? compiling.signal})`);
    await bundleService(compiled, out);

    for (const dir of DATA_DIRS) cpSync(join(ROOT, dir), join(out, dir), { recursive: true });
    writeParsedData(ROOT, out);
    for (const dir of SOURCE_DIRS) {
      for (const file of filesUnder(ROOT, dir)) {
        if (file.endsWith('.ts') || file.endsWith('.md')) continue;
        const target = join(out, relative(ROOT, file));
        mkdirSync(dirname(target), { recursive: true });
        cpSync(file, target);
      }
    }

    const { code } = await bundleWorkflows();
    writeFileSync(join(out, 'workflow-bundle.js'), code);

    // Dated when the build began: a source saved while it ran is newer, and the next start builds again.
    writeFileSync(join(out, '.built'), '');
    utimesSync(join(out, '.built'), started, started);
    rmSync(DIST, { recursive: true, force: true });
    try {
      renameSync(out, DIST);
    } catch (err) {
      // Another start built it in the meantime (both found the output stale): keep theirs.
      if ((err as NodeJS.ErrnoException).code !== 'ENOTEMPTY' && (err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      rmSync(out, { recursive: true, force: true });
    }
  } catch (err) {
    rmSync(out, { recursive: true, force: true });
    throw err;
  } finally {
    rmSync(compiled, { recursive: true, force: true });
  }
  console.error(`built ${relative(ROOT, DIST)}/ in ${((Date.now() - started.getTime()) / 1000).toFixed(1)} s (${relative(ROOT, STAMP)})`);
}

if (import.meta.main) {
  build().catch((err: unknown) => {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  });
}
