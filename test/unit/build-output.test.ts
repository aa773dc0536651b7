import { mkdirSync, mkdtempSync, readFileSync, rmSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { parse } from 'yaml';
import { outputIsStale, ROOT } from '../../src/build/output.ts';
import { writeParsedData } from '../../src/build/parsed-data.ts';

/**
 * When `npm start` builds (src/build/output.ts): no output, or any input newer than the stamp the last
 * build left — a source, a file it copies, a project file, or a folder whose file was deleted; the
 * client package and the build scripts are not inputs.
 */

const FILES = [
  'package.json',
  'package-lock.json',
  'tsconfig.json',
  'tsconfig.build.json',
  'src/main.ts',
  'src/http/docs/docs.css',
  'src/client/src/index.ts',
  'src/build/start.ts',
  'workflows/index.ts',
  'catalog/demo.yaml',
  'openapi/openapi.yaml',
];
const BEFORE = new Date('2026-01-01T00:00:00Z');
const BUILT = new Date('2026-01-02T00:00:00Z');
const AFTER = new Date('2026-01-03T00:00:00Z');

/** A project whose every file and folder predates its build's stamp. */
function project(): string {
  const root = mkdtempSync(join(tmpdir(), 'wr-build-output-'));
  for (const file of [...FILES, 'dist/.built']) {
    mkdirSync(join(root, dirname(file)), { recursive: true });
    writeFileSync(join(root, file), '');
  }
  const folders = new Set(
    FILES.flatMap((f) =>
      f
        .split('/')
        .slice(0, -1)
        .map((_, i, parts) => parts.slice(0, i + 1).join('/')),
    ),
  );
  for (const path of [...FILES, ...folders]) utimesSync(join(root, path), BEFORE, BEFORE);
  utimesSync(join(root, 'dist/.built'), BUILT, BUILT);
  return root;
}

function withProject(fn: (root: string) => void): void {
  const root = project();
  try {
    fn(root);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

test('a build newer than every input is current', () => withProject((root) => assert.is(outputIsStale(root), false)));

test('no stamp (no build, or one that did not finish) is stale', () =>
  withProject((root) => {
    unlinkSync(join(root, 'dist/.built'));
    assert.is(outputIsStale(root), true);
  }));

test('a source, a copied file or a project file saved after the build makes it stale', () => {
  for (const file of [
    'src/main.ts',
    'src/http/docs/docs.css',
    'workflows/index.ts',
    'catalog/demo.yaml',
    'openapi/openapi.yaml',
    'package-lock.json',
    'tsconfig.build.json',
  ]) {
    withProject((root) => {
      utimesSync(join(root, file), AFTER, AFTER);
      assert.is(outputIsStale(root), true, file);
    });
  }
});

test('a deleted source makes it stale (its folder changed)', () =>
  withProject((root) => {
    unlinkSync(join(root, 'src/http/docs/docs.css'));
    assert.is(outputIsStale(root), true);
  }));

test('the client package and the build scripts are not inputs', () =>
  withProject((root) => {
    for (const file of ['src/client/src/index.ts', 'src/build/start.ts']) utimesSync(join(root, file), AFTER, AFTER);
    assert.is(outputIsStale(root), false);
  }));

test('the build ships the OpenAPI document as JSON equal to the YAML source', () => {
  const out = mkdtempSync(join(tmpdir(), 'wr-build-parsed-'));
  try {
    mkdirSync(join(out, 'openapi'));
    writeParsedData(ROOT, out);
    const json: unknown = JSON.parse(readFileSync(join(out, 'openapi/openapi.json'), 'utf8'));
    assert.equal(json, parse(readFileSync(join(ROOT, 'openapi/openapi.yaml'), 'utf8')));
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});

test.run();
