import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { NODE_FLAGS, START_ENV } from '../../src/build/output.ts';
import { startService } from '../helpers/service-process.ts';
import { countTemporal, temporalAddress } from '../helpers/temporal.ts';
import { waitFor } from '../helpers/wait-for.ts';

/**
 * The production start (docs/operations.md "Build and production start"): `npm start` builds dist/ when
 * it is missing or stale and runs the compiled service as npm's only child, one node process (no sh,
 * no tsx) with the production start's environment (START_ENV), so the SIGTERM npm forwards stops it;
 * `node dist/src/main.js` serves from the compiled output alone (the demo catalog, the OpenAPI document
 * and the docs page's assets resolve there), and its Temporal worker runs the workflow bundle the build
 * wrote.
 */

/** pid, command line and children of a live process, from /proc. */
function proc(pid: number): { argv: string[]; children: number[] } | null {
  try {
    const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
    const children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
    return { argv, children };
  } catch {
    return null;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function answers(url: string): Promise<boolean> {
  return fetch(url).then(
    () => true,
    () => false,
  );
}

test("npm start runs the compiled service as npm's one node child, and a SIGTERM sent to npm stops it", async () => {
  const dir = mkdtempSync(join(tmpdir(), 'wr-npm-start-'));
  // A first start on a fresh clone builds (tsc and the workflow bundle) before it listens.
  const svc = startService({ DATA_DIR: dir }, { command: ['npm', 'start'], upWithinMs: 300_000 });
  let node: number | undefined;
  try {
    const url = await svc.url;
    assert.is((await fetch(`${url}/readyz`)).status, 200);
    const npm = proc(svc.child.pid!);
    assert.ok(npm, 'npm is running');
    assert.is(npm!.children.length, 1, 'npm has one child');
    node = npm!.children[0]!;
    const service = proc(node)!;
    assert.match(service.argv[0]!, /(^|\/)node$/, `npm's child is node itself, not sh or tsx: ${service.argv.join(' ')}`);
    assert.equal(service.argv.slice(1), [...NODE_FLAGS, 'src/build/start.ts', 'src/main.js'], "with the production start's node options");
    const environ = readFileSync(`/proc/${node}/environ`, 'utf8').split('\0');
    for (const [name, value] of Object.entries(START_ENV)) assert.ok(environ.includes(`${name}=${value}`), `node started with ${name}=${value}`);
    for (const child of service.children) assert.not.match(proc(child)?.argv.join(' ') ?? '', /tsx|esbuild|\bsh\b/);

    svc.child.kill('SIGTERM');
    await waitFor('node to exit after npm got SIGTERM', () => !alive(node!), 30_000);
    assert.not.ok(await answers(`${url}/readyz`), 'the port is closed');
    assert.match(svc.output(), '"msg":"shutting down"');
  } finally {
    if (node && alive(node)) process.kill(node, 'SIGKILL');
    svc.child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
});

/** Above this many modules loaded at idle, the service is no longer bundled (src/build/bundle.ts): each of its own files and packages would count. */
const BUNDLED_MODULES_MAX = 300;

test('node dist/src/main.js serves from the compiled output: demo catalog, OpenAPI document, docs assets', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'wr-dist-start-'));
  const modules = join(dir, 'modules.txt');
  writeFileSync(modules, '');
  const hook = ['--import', './test/helpers/record-loaded-modules.mjs'];
  const svc = startService({ DATA_DIR: dir, LOG_LEVEL: 'warn', LOADED_MODULES_FILE: modules }, { command: [process.execPath, ...hook, 'dist/src/main.js'] });
  try {
    const url = await svc.url;
    assert.equal(proc(svc.child.pid!)?.children, [], 'one process');
    // Bundled, it loads a few chunks and Node's own modules; the packages left outside the bundle only
    // when used, so none here (test/process/loaded-modules.test.ts holds the same from source).
    const loaded = new Set(readFileSync(modules, 'utf8').split('\n').filter(Boolean));
    assert.ok(loaded.size < BUNDLED_MODULES_MAX, `${loaded.size} modules loaded`);
    const unused = [...loaded].filter((u) => /node_modules\/(@temporalio|@ai-sdk|ai|undici|@scalar|graphiql|react|@opentelemetry\/(sdk-|exporter-))\b/.test(u));
    assert.equal(unused, [], 'an idle embedded process loads no Temporal SDK, provider SDK, page or OpenTelemetry SDK');
    const workflows = await fetch(`${url}/v1/workflows`, { headers: { authorization: 'Bearer wr_demo_key' } });
    assert.is(workflows.status, 200);
    assert.ok(((await workflows.json()) as { workflows: unknown[] }).workflows.length > 0);
    assert.is((await fetch(`${url}/v1/openapi.json`)).status, 200);
    // The API reference and the GraphQL explorer (a browser's GET /graphql): their assets include the
    // repository's own files (docs.css, graphiql-start.js) beside the compiled modules.
    const pages = [await (await fetch(`${url}/docs`)).text(), await (await fetch(`${url}/graphql`, { headers: { accept: 'text/html' } })).text()];
    const assets = pages.flatMap((page) => [...page.matchAll(/\/docs\/assets\/[\w-]+\/[\w.-]+/g)].map((m) => m[0]));
    for (const own of ['/docs.css', '/graphiql-start.js'])
      assert.ok(
        assets.some((a) => a.endsWith(own)),
        `a page links ${own}`,
      );
    for (const asset of assets) assert.is((await fetch(`${url}${asset}`)).status, 200, asset);
    assert.is(await svc.stop(), 0);
  } finally {
    svc.child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
});

const address = temporalAddress('db: production start');
if (address) {
  test(
    '[temporal] compiled with ENGINE=temporal and the production options: the worker loads dist/workflow-bundle.js and a demo run completes',
    countTemporal(async () => {
      const dir = mkdtempSync(join(tmpdir(), 'wr-dist-temporal-'));
      const env = {
        DATA_DIR: dir,
        DATABASE_URL: '',
        ENGINE: 'temporal',
        TEMPORAL_ADDRESS: address,
        TEMPORAL_TASK_QUEUE: `dist-${randomUUID()}`,
        LOG_LEVEL: 'warn',
        ...START_ENV,
      };
      // With the production start's options and environment, so the run goes through the worker as operators run it.
      const svc = startService(env, { command: [process.execPath, ...NODE_FLAGS, 'dist/src/main.js'] });
      try {
        const url = await svc.url;
        // Compiled, there are no workflow sources to bundle from: only the built file can run.
        const res = await fetch(`${url}/v1/runs`, {
          method: 'POST',
          headers: { authorization: 'Bearer wr_demo_key', 'content-type': 'application/json', prefer: 'wait=30' },
          body: JSON.stringify({ workflow: '00000000-0000-4000-8000-00000000f001', inputs: { name: 'Ada', tone: 'casual' } }),
        });
        assert.is(res.status, 200, svc.output());
        assert.is(((await res.json()) as { status: string }).status, 'completed');
        assert.is(await svc.stop(), 0);
      } finally {
        svc.child.kill('SIGKILL');
        rmSync(dir, { recursive: true, force: true });
      }
    }),
  );
}

test.run();
