import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { latin1Only, WORKFLOWS_PATH } from '../../src/engine/temporal/workflow-bundle.ts';
import { quietTemporalRuntime, silentLogger, workflowBundle } from './support.ts';

/**
 * The workflow code must run in Temporal's deterministic sandbox: bundleWorkflowCode (what Worker.create
 * does at start) rejects Node built-ins, and nothing of the database or provider layers may be pulled in
 * (the workflow imports the activities as types only).
 */

quietTemporalRuntime();

test('bundleWorkflowCode bundles workflows/ and the bundle holds the run workflow', async () => {
  const bundle = await workflowBundle();
  assert.ok(bundle.code.length > 10_000);
  assert.match(bundle.code, /runWorkflow/);
  // The pure run driver (and the interpreter it plans with) is in; it is what decides.
  assert.match(bundle.code, /function nextRunMove\(/);
  assert.match(bundle.code, /run-driver\.ts/);
});

test("the bundle keeps a source map that places workflow code in its files, without the files' text", async () => {
  const { code } = await workflowBundle();
  const inline = /\/\/# sourceMappingURL=data:application\/json;[^,]*base64,(\S+)\s*$/.exec(code);
  assert.ok(inline, 'an inline source map, which the worker requires');
  const map = JSON.parse(Buffer.from(inline![1]!, 'base64').toString()) as Record<string, unknown>;
  assert.ok((map.mappings as string).length > 10_000, 'mappings');
  assert.ok(
    (map.sources as string[]).some((s) => s.endsWith('workflows/run-workflow.ts')),
    "the workflow's own file among the sources",
  );
  assert.is(map.sourcesContent, undefined, 'no copy of every source');
});

test('the bundle is Latin-1 text (one byte a character in V8), with the same meaning', async () => {
  const { code } = await workflowBundle();
  const wide = /[^\u0000-\u00ff]/.exec(code);
  assert.is(wide, null, `a character above U+00FF at ${wide?.index}: ${JSON.stringify(code.slice((wide?.index ?? 0) - 40, (wide?.index ?? 0) + 5))}`);
  // Escaped in a literal, a character is the same character; the sources' comments hold the rest.
  const source = "'a — b → c … 😀' /* — */";
  const escaped = latin1Only(source);
  assert.not.match(escaped, /[^\u0000-\u00ff]/);
  assert.is(new Function(`return ${escaped}`)(), 'a — b → c … 😀');
  assert.is(latin1Only('plain café'), 'plain café', 'Latin-1 text is left as it is');
});

test('no database, provider or Node-only module reaches the workflow bundle', async () => {
  const { code } = await workflowBundle();
  for (const forbidden of [
    'node_modules/@mikro-orm',
    'node_modules/pg/',
    'node_modules/decimal.js',
    'node_modules/@ai-sdk',
    'node_modules/ai/',
    'src/runs/',
    'execute-step.ts',
    'drive-run.ts',
    'node_modules/@temporalio/client',
    'node_modules/@temporalio/activity',
  ]) {
    assert.not.ok(code.includes(forbidden), `${forbidden} is not in the bundle`);
  }
});

/** Bundles a throwaway workflows file; returns the error message or null when it bundled. */
async function bundleError(source: string): Promise<string | null> {
  const dir = mkdtempSync(join(tmpdir(), 'wf-bundle-'));
  try {
    const file = join(dir, 'workflows.ts');
    writeFileSync(file, source);
    await workflowBundle(file, silentLogger);
    return null;
  } catch (err) {
    return String((err as Error).message);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('a workflow that imports a Node built-in fails to bundle (the check can fail)', async () => {
  const error = await bundleError(
    `import { readFileSync } from 'node:fs';\nexport async function bad(): Promise<string> { return readFileSync('/etc/hostname', 'utf8'); }\n`,
  );
  assert.ok(error, 'bundling must fail');
  assert.match(error!, /Webpack finished with errors/);
});

test('a workflow that imports the activity implementations (not just their types) fails to bundle', async () => {
  const activities = join(WORKFLOWS_PATH, '..', '..', 'src', 'runs', 'prepare-run.ts');
  const error = await bundleError(
    `import { prepareRun } from ${JSON.stringify(activities)};\nexport async function bad(): Promise<unknown> { return prepareRun as unknown; }\n`,
  );
  assert.ok(error, 'bundling must fail: the activities pull in the database layer');
  assert.match(error!, /Webpack finished with errors/);
});

test.run();
