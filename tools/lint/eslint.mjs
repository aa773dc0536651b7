// Runs ESLint through its Node API with `typescript` resolved to the TypeScript of this workspace (5.9,
// which has the JavaScript API that typescript-eslint and ts-api-utils call) wherever they are
// installed: the project's TypeScript 7 is a native compiler without one.
// Usage: node tools/lint/eslint.mjs [--fix] [paths…] (default: the service, its tests and benches).
import { registerHooks } from 'node:module';
import { fileURLToPath } from 'node:url';

const typescript = import.meta.resolve('typescript');
registerHooks({
  resolve(specifier, context, nextResolve) {
    return specifier === 'typescript' ? { url: typescript, format: 'commonjs', shortCircuit: true } : nextResolve(specifier, context);
  },
});

const { ESLint } = await import('eslint');
const args = process.argv.slice(2);
const fix = args.includes('--fix');
const paths = args.filter((a) => a !== '--fix');
const eslint = new ESLint({
  cwd: fileURLToPath(new URL('../..', import.meta.url)),
  overrideConfigFile: fileURLToPath(new URL('eslint.config.js', import.meta.url)),
  fix,
});
const started = performance.now();
const results = await eslint.lintFiles(paths.length ? paths : ['src', 'workflows', 'test', 'bench']);
if (fix) await ESLint.outputFixes(results);
const formatter = await eslint.loadFormatter(process.env.ESLINT_FORMAT ?? 'stylish');
const text = await formatter.format(results);
if (text) console.log(text);
const problems = results.reduce((n, r) => n + r.errorCount + r.warningCount, 0);
console.log(`eslint: ${results.length} files, ${problems} problems, ${((performance.now() - started) / 1000).toFixed(1)} s`);
process.exitCode = problems ? 1 : 0;
