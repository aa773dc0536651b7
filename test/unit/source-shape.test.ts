import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'uvu';
import * as assert from 'uvu/assert';

/**
 * The shape a newcomer can read (DEVELOPERS.md): no source file under src/ or workflows/ over 500 lines
 * (split by job), no line over 160 characters. Generated code and installed packages aside.
 */

const root = fileURLToPath(new URL('../../', import.meta.url));
const MAX_LINES = 500;
const MAX_LINE_LENGTH = 160;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'node_modules' || entry.name === 'generated' ? [] : sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

const files = [...sourceFiles(join(root, 'src')), ...sourceFiles(join(root, 'workflows'))];

test(`no source file over ${MAX_LINES} lines`, () => {
  assert.ok(files.length > 100, `found only ${files.length} source files`);
  const long = files
    .map((file) => ({ file: relative(root, file), lines: readFileSync(file, 'utf8').split('\n').length - 1 }))
    .filter((f) => f.lines > MAX_LINES);
  assert.equal(long, []);
});

test(`no source line over ${MAX_LINE_LENGTH} characters`, () => {
  const wide = files.flatMap((file) =>
    readFileSync(file, 'utf8')
      .split('\n')
      .flatMap((line, i) => (line.length > MAX_LINE_LENGTH ? [`${relative(root, file)}:${i + 1} (${line.length})`] : [])),
  );
  assert.equal(wide, []);
});

test.run();
