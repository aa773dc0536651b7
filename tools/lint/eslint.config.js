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

/** A module path into a package's own build output (`pkg/lib/…`, `@scope/pkg/dist/…`) rather than what it exports. */
const PACKAGE_INTERNALS = String.raw`^(@[^/]+/)?[^./@][^/]*/(lib|dist|build)/`;
const internalsMessage = 'a package’s lib/ (dist/, build/) files are not its API: import what the package exports';
const internalsLiteral = `/${PACKAGE_INTERNALS.replaceAll('/', '\\/')}/`;

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
    // Library edges public: a package is used through what it exports, so an upgrade that moves its files
    // breaks nothing. A package that documents such a path as its entry is named with a disable comment saying so.
    files: ['src/**/*.ts', 'workflows/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', { patterns: [{ regex: PACKAGE_INTERNALS, message: internalsMessage }] }],
      'no-restricted-syntax': [
        'error',
        { selector: `ImportExpression[source.value=${internalsLiteral}]`, message: internalsMessage },
        { selector: `CallExpression[callee.name='require'][arguments.0.value=${internalsLiteral}]`, message: internalsMessage },
      ],
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
