import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Statement } from '../../src/db/statement.ts';

/** The repository's root, and the .ts files under one of its folders (paths relative to the root). */
export const root = new URL('../../', import.meta.url).pathname;

export function tsFiles(dir: string): string[] {
  return readdirSync(join(root, dir)).flatMap((f) => {
    const path = join(dir, f);
    if (statSync(join(root, path)).isDirectory()) return tsFiles(path);
    return path.endsWith('.ts') ? [path] : [];
  });
}

/** Every statement that src/sql/*.ts exports: a statement, or a list of a statement's variants. */
export async function sqlStatements(): Promise<Statement[]> {
  const found = new Set<Statement>();
  for (const path of tsFiles('src/sql')) {
    const mod = (await import(join(root, path))) as Record<string, unknown>;
    for (const v of Object.values(mod).flatMap((x) => (Array.isArray(x) ? x : [x]))) {
      if (v && typeof v === 'object' && typeof (v as Statement).name === 'string' && typeof (v as Statement).text === 'string') found.add(v as Statement);
    }
  }
  return [...found];
}

/** The most positional parameters a statement takes: a call of more travels as one JSON parameter with named fields (`jsonb_to_record($1)`). */
export const MAX_POSITIONAL_PARAMETERS = 8;

/** How many positional parameters a statement's text takes: its highest `$n`. */
export function positionalParameters(text: string): number {
  return Math.max(0, ...[...text.matchAll(/\$(\d+)/g)].map((m) => Number(m[1])));
}

/** The statements that take more than MAX_POSITIONAL_PARAMETERS, as `name ($n)`. */
export function overParameterised(statements: readonly Statement[]): string[] {
  return statements.filter((s) => positionalParameters(s.text) > MAX_POSITIONAL_PARAMETERS).map((s) => `${s.name} ($${positionalParameters(s.text)})`);
}
