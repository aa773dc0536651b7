import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { Statement } from '../../src/db/statement.ts';

/**
 * The SQL under src/sql/ is where a newcomer looks for it: every statement has a constant text with `$n`
 * placeholders and a snake_case name that is also its prepared-statement name, and that name, read in a
 * Postgres log, leads to exactly one file.
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const SQL_DIR = path.join(ROOT, 'src/sql');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) return e.name === 'node_modules' || e.name === 'generated' ? [] : sourceFiles(full);
    return e.name.endsWith('.ts') ? [full] : [];
  });
}

const isStatement = (v: unknown): v is Statement =>
  typeof v === 'object' && v !== null && typeof (v as Statement).name === 'string' && typeof (v as Statement).text === 'string';

const t = suite<{ statements: { file: string; s: Statement }[] }>('SQL statements in src/sql');

t.before(async (ctx) => {
  ctx.statements = [];
  for (const file of readdirSync(SQL_DIR).filter((f) => f.endsWith('.ts'))) {
    const mod = (await import(path.join(SQL_DIR, file))) as Record<string, unknown>;
    for (const v of Object.values(mod)) if (isStatement(v)) ctx.statements.push({ file: `src/sql/${file}`, s: v });
  }
});

t('every file under src/sql exports named statements', ({ statements }) => {
  const files = new Set(statements.map((x) => x.file));
  assert.ok(statements.length >= 20, `only ${statements.length} statements found`);
  for (const file of readdirSync(SQL_DIR).filter((f) => f.endsWith('.ts'))) {
    const text = readFileSync(path.join(SQL_DIR, file), 'utf8');
    // A file may hold only shared fragments (CTEs) used by statements elsewhere.
    if (/statement\(/.test(text)) assert.ok(files.has(`src/sql/${file}`), `${file} defines statements but exports none`);
  }
});

t('statement names are snake_case and unique', ({ statements }) => {
  const seen = new Map<string, string>();
  for (const { file, s } of statements) {
    assert.match(s.name, /^[a-z][a-z0-9_]*$/, `${file}: ${s.name}`);
    const prior = seen.get(s.name);
    assert.ok(prior === undefined || prior === file, `${s.name} is defined in ${prior} and ${file}`);
    seen.set(s.name, file);
  }
});

t('each statement name leads to exactly one file of src/', ({ statements }) => {
  const sources = sourceFiles(path.join(ROOT, 'src')).map((f) => ({ f: path.relative(ROOT, f), text: readFileSync(f, 'utf8') }));
  for (const { file, s } of statements) {
    const defining = sources.filter((x) => x.text.includes(`'${s.name}'`) || x.text.includes(`"${s.name}"`)).map((x) => x.f);
    assert.equal(defining, [file], `the name ${s.name}`);
  }
});

t('statement texts use $n placeholders, never ?', ({ statements }) => {
  for (const { file, s } of statements) {
    // `?` is also a jsonb operator (`?`, `?|`, `?&`); a placeholder stands where a value does.
    assert.not.match(s.text, /(=|,|\(|\bin|\blimit|\boffset)\s*\?(?![|&])/i, `${file}: ${s.name}`);
  }
});

t.run();
