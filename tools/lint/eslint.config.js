import { fileURLToPath } from 'node:url';
import tseslint from 'typescript-eslint';

/**
 * The lint npm test runs (tools/lint/eslint.mjs). The service (src/, workflows/): typescript-eslint's
 * type-checked recommended rules, and the shape a newcomer can read — files of at most 500 lines, lines
 * of at most 160 characters. Tests and benches: the rules about promises (a floating assertion passes
 * whatever it checks) and type-only imports.
 */
const root = fileURLToPath(new URL('../..', import.meta.url));

const typeChecked = { parserOptions: { projectService: true, tsconfigRootDir: root } };

export default tseslint.config(
  { ignores: ['**/node_modules/**', 'src/client/**', 'test/fixtures/**', '**/generated/**', 'tools/**', '**/*.js', '**/*.mjs', '**/*.cjs'] },
  { linterOptions: { reportUnusedDisableDirectives: 'error' } },
  {
    files: ['src/**/*.ts', 'workflows/**/*.ts'],
    extends: [tseslint.configs.recommendedTypeChecked],
    languageOptions: typeChecked,
    rules: {
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      // Implementations of an async interface (EnginePort, RunEventBus, Apollo's plugin hooks) are async
      // without awaiting anything; the interface, not the body, decides.
      '@typescript-eslint/require-await': 'off',
      // A leading underscore names what a signature or a destructuring must hold but the body ignores.
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_' }],
      // Not yet: values typed `unknown` turned into text where they come from SQL rows (String(row.x),
      // `${row.x}`). Each needs its row typed at the statement, which is a change of its own.
      '@typescript-eslint/no-base-to-string': 'off',
      '@typescript-eslint/restrict-template-expressions': 'off',
      'max-lines': ['error', { max: 500 }],
      'max-len': ['error', { code: 160 }],
    },
  },
  {
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    languageOptions: { parser: tseslint.parser, ...typeChecked },
    plugins: { '@typescript-eslint': tseslint.plugin },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      // A listener of a test server or child process that rejects ends the run as an unhandled
      // rejection, which fails it: what a test wants, so only promises passed as values are checked.
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: false }],
      '@typescript-eslint/await-thenable': 'error',
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
    },
  },
);
