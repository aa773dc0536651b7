import { readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { REPO_ROOT, serviceSources } from '../helpers/source-files.ts';

/**
 * The shape a newcomer can read (DEVELOPERS.md): no source file under src/ or workflows/ over 500 lines
 * (split by job), no line over 160 characters. Generated code and installed packages aside.
 */

const MAX_LINES = 500;
const MAX_LINE_LENGTH = 160;

const files = serviceSources();

test(`no source file over ${MAX_LINES} lines`, () => {
  assert.ok(files.length > 100, `found only ${files.length} source files`);
  const long = files
    .map((file) => ({ file: relative(REPO_ROOT, file), lines: readFileSync(file, 'utf8').split('\n').length - 1 }))
    .filter((f) => f.lines > MAX_LINES);
  assert.equal(long, []);
});

test(`no source line over ${MAX_LINE_LENGTH} characters`, () => {
  const wide = files.flatMap((file) =>
    readFileSync(file, 'utf8')
      .split('\n')
      .flatMap((line, i) => (line.length > MAX_LINE_LENGTH ? [`${relative(REPO_ROOT, file)}:${i + 1} (${line.length})`] : [])),
  );
  assert.equal(wide, []);
});

test.run();
