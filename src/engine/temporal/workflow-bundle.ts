import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode } from '@temporalio/worker';

/**
 * The workflow code a worker runs: workflows/ bundled by webpack with the tracing interceptors (always,
 * see docs/tracing.md). `npm run build` writes it once to dist/ (src/build/build.ts); a compiled worker
 * loads that file, so no production start runs webpack. From the source tree (dev, tests) the same
 * relative path names no file and the bundle is built on first use, once per process. Only erasable
 * TypeScript here: the build runs this module from source with plain node.
 */

/** The workflows module the bundle is built from (`workflows/index.ts`). */
export const WORKFLOWS_PATH = fileURLToPath(new URL('../../../workflows/index.ts', import.meta.url));

/** The module the bundle includes as its workflow interceptors (src/observability/temporal-tracing.ts). */
export const WORKFLOW_TRACING_INTERCEPTORS = fileURLToPath(new URL('../../../workflows/tracing-interceptors.ts', import.meta.url));

export const WORKFLOW_BUNDLE_OPTIONS = { workflowsPath: WORKFLOWS_PATH, workflowInterceptorModules: [WORKFLOW_TRACING_INTERCEPTORS] };

/** Where the build writes the bundle: dist/workflow-bundle.js, seen from dist/src/engine/temporal/. */
export const PREBUILT_WORKFLOW_BUNDLE = fileURLToPath(new URL('../../../workflow-bundle.js', import.meta.url));

export type WorkflowBundle = { code: string } | { codePath: string };

const nothing = () => undefined;
const quiet = { log: nothing, trace: nothing, debug: nothing, info: nothing, warn: nothing, error: nothing };

/** Bundles workflows/ from source (webpack); what the build writes and what dev and tests run. */
export async function bundleWorkflows(): Promise<{ code: string }> {
  const { code } = await bundleWorkflowCode({ ...WORKFLOW_BUNDLE_OPTIONS, logger: quiet });
  return { code: latin1Only(withoutSourcesContent(code)) };
}

/**
 * The bundle with every character above U+00FF written as a `\u` escape. V8 holds a string with even one
 * such character at two bytes per character, and the worker's process and its workflow thread each keep
 * the bundle's text for good; the few there are stand in comments (a dash, an arrow), where an escape
 * changes no behaviour, and in string or regular expression literals an escape means the same character.
 */
export function latin1Only(code: string): string {
  return code.replace(/[^\u0000-\u00ff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

const INLINE_MAP = '//# sourceMappingURL=data:';

/**
 * The bundle's inline source map without the sources it embeds. The worker needs the map (it maps
 * workflow stack traces back to files and lines) but reads the sources only for a stack-trace query with
 * `showStackTraceSources`, which this service does not set; every worker thread and the process keep the
 * bundle, map included, as text, and the sources are most of the map.
 */
export function withoutSourcesContent(code: string): string {
  const at = code.lastIndexOf(INLINE_MAP);
  const data = at < 0 ? -1 : code.indexOf('base64,', at);
  if (data < 0) return code;
  const map = JSON.parse(Buffer.from(code.slice(data + 'base64,'.length).trim(), 'base64').toString('utf8')) as { sourcesContent?: unknown };
  delete map.sourcesContent;
  return `${code.slice(0, data)}base64,${Buffer.from(JSON.stringify(map)).toString('base64')}\n`;
}

let bundle: Promise<WorkflowBundle> | undefined;

/** The built file when there is one, else workflows/ bundled once per process (tests start many workers). */
export function runWorkflowBundle(): Promise<WorkflowBundle> {
  if (existsSync(PREBUILT_WORKFLOW_BUNDLE)) return Promise.resolve({ codePath: PREBUILT_WORKFLOW_BUNDLE });
  bundle ??= bundleWorkflows().catch((err: unknown) => {
    bundle = undefined;
    throw err;
  });
  return bundle;
}
