import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, mkdirSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'uvu';
import * as assert from 'uvu/assert';

/**
 * The client package (src/client) as a package: its committed types are what openapi-typescript makes of
 * openapi/openapi.yaml today (regenerate with `npm run client:generate`), it imports only its own files
 * and its declared dependencies (never the service's code), and `npx wr` works from the repository root.
 */

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const PKG = join(ROOT, 'src', 'client');

test('the committed generated types match openapi/openapi.yaml (else: npm run client:generate)', () => {
  mkdirSync(join(ROOT, '.tmp'), { recursive: true });
  const dir = mkdtempSync(join(ROOT, '.tmp', 'client-types-'));
  try {
    const out = join(dir, 'api.ts');
    const gen = spawnSync(join(PKG, 'node_modules', '.bin', 'openapi-typescript'), ['../../openapi/openapi.yaml', '-o', out], { cwd: PKG, encoding: 'utf8' });
    assert.is(gen.status, 0, gen.stderr);
    const fresh = readFileSync(out, 'utf8');
    const committed = readFileSync(join(PKG, 'src', 'generated', 'api.ts'), 'utf8');
    assert.ok(fresh === committed, 'src/client/src/generated/api.ts is stale: run `npm run client:generate` and commit it');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) => {
    const p = join(dir, d.name);
    if (d.isDirectory()) return d.name === 'node_modules' ? [] : sources(p);
    return /\.(ts|js)$/.test(d.name) ? [p] : [];
  });
}

test('the client imports only its own files, Node built-ins and its declared dependencies', () => {
  const pkg = JSON.parse(readFileSync(join(PKG, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
  const files = sources(PKG);
  assert.ok(files.length > 5);
  const bad: string[] = [];
  for (const file of files) {
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(/(?:from|import)\s*\(?\s*'([^']+)'/g)) {
      const spec = m[1]!;
      if (spec.startsWith('.')) {
        const target = resolve(dirname(file), spec);
        if (relative(PKG, target).startsWith('..')) bad.push(`${relative(ROOT, file)} -> ${spec}`);
      } else if (!spec.startsWith('node:') && !builtinModules.includes(spec)) {
        const name = spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!;
        if (!(name in pkg.dependencies)) bad.push(`${relative(ROOT, file)} -> ${spec} (not a dependency)`);
      }
    }
  }
  assert.equal(bad, []);
});

test('npx wr runs from the repository root (the workspace bin is linked by npm ci)', () => {
  const r = spawnSync('npx', ['--no-install', 'wr', '--cli-version'], { cwd: ROOT, encoding: 'utf8' });
  assert.is(r.status, 0, r.stderr);
  assert.is(r.stdout.trim(), JSON.parse(readFileSync(join(PKG, 'package.json'), 'utf8')).version);
});

test.run();
