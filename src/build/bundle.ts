import { readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { build, type Plugin } from 'esbuild';

/**
 * The service's entry points bundled (src/build/build.ts): the modules tsc wrote, and the packages they
 * import, as a few files instead of about two thousand modules to resolve and load at every start.
 * Code loaded by `import()` stays lazy (a chunk of its own); the packages below stay outside the
 * bundle, loaded from node_modules as before. Plain node runs this file, so only erasable TypeScript.
 */

export const ENTRIES = ['src/main.js', 'src/worker.js'];

/**
 * Not bundled: what only some configurations load (Temporal, provider SDKs, the docs page and explorer,
 * OpenTelemetry's SDK and exporters, PGlite's engine), and packages that read their own files or load
 * native code at run time. Everything MikroORM is bundled, its driver and migrator too: one copy of its
 * metadata, and the migrator it would otherwise import by name is found registered.
 */
const EXTERNAL = [
  '@temporalio/*',
  '@ai-sdk/*',
  'ai',
  '@openrouter/*',
  'undici',
  '@scalar/*',
  'graphiql',
  'react',
  'react-dom',
  '@opentelemetry/sdk-*',
  '@opentelemetry/exporter-*',
  '@opentelemetry/resources',
  '@opentelemetry/core',
  '@electric-sql/*',
  'pg-native',
  '@swc/*',
  'class-validator',
];

/**
 * A module that finds files next to itself (`new URL('../../catalog/demo.yaml', import.meta.url)`) keeps
 * its own URL in the bundle: the place tsc wrote it under `compiled`, moved to the same place under `out`.
 */
function ownModuleUrl(compiled: string, outdir: string): Plugin {
  return {
    name: 'own-module-url',
    setup(b) {
      b.onLoad({ filter: /\.js$/ }, (args) => {
        if (relative(compiled, args.path).startsWith('..')) return undefined;
        const text = readFileSync(args.path, 'utf8');
        if (!text.includes('import.meta.url')) return undefined;
        const own = `./${relative(outdir, join(outdir, '..', relative(compiled, args.path))).replaceAll('\\', '/')}`;
        return { contents: text.replaceAll('import.meta.url', `new URL(${JSON.stringify(own)}, import.meta.url).href`), loader: 'js' };
      });
    },
  };
}

/**
 * An ES `import` of `node:http` makes Node build that module's ES facade, which reads every export,
 * the lazy `WebSocket`, `CloseEvent` and `MessageEvent` getters included: that loads the undici Node
 * carries (about 3 MiB of heap, and 20-30 ms of CPU at every start) though the service uses none of
 * them. In the bundle such imports read the module itself (`process.getBuiltinModule`), whose getters
 * stay lazy; a name the module does not export plainly fails the build.
 */
function httpWithoutFacade(): Plugin {
  const http = process.getBuiltinModule('node:http') as Record<string, unknown>;
  const names = Object.keys(http).filter((name) => !Object.getOwnPropertyDescriptor(http, name)?.get);
  return {
    name: 'http-without-facade',
    setup(b) {
      b.onResolve({ filter: /^(node:)?http$/ }, (args) =>
        args.kind === 'import-statement' ? { path: 'node:http', namespace: 'http-without-facade' } : undefined,
      );
      b.onLoad({ filter: /.*/, namespace: 'http-without-facade' }, () => ({
        contents: `const http = process.getBuiltinModule('node:http'); export default http; export const { ${names.join(', ')} } = http;`,
        loader: 'js',
      }));
    },
  };
}

/** Bundles ENTRIES of `compiled` (tsc's output, laid out as the repository) into `out` at the same paths. */
export async function bundleService(compiled: string, out: string): Promise<void> {
  const outdir = join(out, 'src');
  await build({
    entryPoints: ENTRIES.map((e) => join(compiled, e)),
    outdir,
    bundle: true,
    splitting: true,
    // MikroORM and type-graphql name entities, tables and GraphQL types after classes: no renaming.
    keepNames: true,
    // Smaller sources, which V8 keeps in the heap; `node --enable-source-maps` maps stack traces back.
    minify: true,
    legalComments: 'none',
    sourcemap: true,
    format: 'esm',
    platform: 'node',
    target: 'node22',
    chunkNames: 'chunk-[hash]',
    external: EXTERNAL,
    plugins: [ownModuleUrl(compiled, outdir), httpWithoutFacade()],
    // CommonJS packages inside an ES module bundle call require() for Node's own modules.
    banner: { js: "import { createRequire as createRequireForBundle } from 'node:module'; const require = createRequireForBundle(import.meta.url);" },
    logLevel: 'warning',
  });
}
