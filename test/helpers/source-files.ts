import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository's root directory. */
export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** The TypeScript files under `dir`, installed packages and generated code left out. */
export function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'node_modules' || entry.name === 'generated' ? [] : sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

/** The service's sources: src/ and workflows/. */
export const serviceSources = (): string[] => [...sourceFiles(join(REPO_ROOT, 'src')), ...sourceFiles(join(REPO_ROOT, 'workflows'))];
