import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { startDemoService } from '../helpers/service-process.ts';
import { temporalAddress } from '../helpers/temporal.ts';
import { waitFor } from '../helpers/wait-for.ts';

/**
 * A process loads only what its configuration uses (docs/performance.md, "The process"): `npm start`
 * runs with a module hook (test/helpers/record-loaded-modules.mjs) that writes down every module it
 * loads, and the packages a configuration does not need must not be among them.
 */

const HOOK = ['--import', './test/helpers/record-loaded-modules.mjs'];
const KEY = { authorization: 'Bearer wr_demo_key', 'content-type': 'application/json' };
/** The demo catalog's "Summarize text": one llm.chat step on openai. */
const SUMMARIZE = '00000000-0000-4000-8000-00000000f002';

/** Packages by name, from the URLs of the modules loaded so far. */
function loadedPackages(file: string): Set<string> {
  const names = new Set<string>();
  for (const url of readFileSync(file, 'utf8').split('\n')) {
    const m = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
    if (m) names.add(m[1]!);
  }
  return names;
}

function assertAbsent(loaded: Set<string>, names: (string | RegExp)[], when: string): void {
  for (const name of names) {
    const found = [...loaded].filter((p) => (typeof name === 'string' ? p === name : name.test(p)));
    assert.equal(found, [], `${when}: ${String(name)} must not be loaded`);
  }
}

/** Provider SDKs, the docs page and explorer, OpenTelemetry's SDK and exporters, the HTTP step's undici. */
const FOR_STEPS_OR_PAGES = [/^@ai-sdk\//, 'ai', '@openrouter/ai-sdk-provider', 'undici', '@scalar/api-reference', 'graphiql', 'react', 'react-dom'];
const OTEL_SDK = [/^@opentelemetry\/(sdk-|exporter-|resources|core$)/];
/** The internal GraphQL API's server and schema: built by its first request (src/graphql/on-demand.ts). */
const GRAPHQL = ['@apollo/server', 'graphql-sse', 'type-graphql', /^@graphql-tools\//];
const INTERNAL_TOKEN = 'loaded-modules-internal-token';

test('the embedded engine loads no Temporal SDK, no provider SDK before a step needs one, and then only that provider', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'wr-modules-'));
  const file = join(dir, 'modules.txt');
  writeFileSync(file, '');
  // An OpenAI endpoint that refuses the connection: the step fails at once, after its SDK loaded.
  const svc = await startDemoService(
    { LOADED_MODULES_FILE: file, OPENAI_API_KEY: 'sk-test', OPENAI_BASE_URL: 'http://127.0.0.1:9/v1', INTERNAL_API_TOKEN: INTERNAL_TOKEN },
    { nodeOptions: HOOK },
  );
  try {
    const idle = loadedPackages(file);
    assert.ok(idle.has('@mikro-orm/core') && idle.has('openapi-backend'), 'the hook records the packages the service loads');
    assertAbsent(idle, [/^@temporalio\//, ...FOR_STEPS_OR_PAGES, ...OTEL_SDK, ...GRAPHQL], 'an idle embedded process');
    if (process.env.DATABASE_URL) assertAbsent(idle, ['@electric-sql/pglite', '@mikro-orm/pglite'], 'on a Postgres server');

    const started = await fetch(`${svc.base}/runs`, { method: 'POST', headers: KEY, body: JSON.stringify({ workflow: SUMMARIZE, inputs: { text: 'hello' } }) });
    assert.is(started.status, 202, await started.clone().text());
    const { run } = (await started.json()) as { run: { id: string } };
    const ended = await waitFor(
      'the llm.chat run to end',
      async () => {
        const r = (await (await fetch(`${svc.base}/runs/${run.id}`, { headers: KEY })).json()) as { status: string };
        return ['completed', 'failed', 'cancelled'].includes(r.status) && r;
      },
      30_000,
    );
    const after = loadedPackages(file);
    assert.ok(after.has('@ai-sdk/openai') && after.has('ai'), `the openai step loaded the AI SDK and its openai provider (run: ${JSON.stringify(ended)})`);
    assertAbsent(after, GRAPHQL, 'before a GraphQL request');

    // A request without the token (a scanner, a probe) is answered before anything is built.
    for (const path of ['/graphql', '/graphql/stream']) {
      const refused = await fetch(`${new URL(svc.base).origin}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ query: '{ __typename }' }),
      });
      assert.is(refused.status, 401, `${path} without the token`);
    }
    assertAbsent(loadedPackages(file), GRAPHQL, 'after requests without the token');

    const graphql = await fetch(`${new URL(svc.base).origin}/graphql`, {
      method: 'POST',
      headers: { authorization: `Bearer ${INTERNAL_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ query: `{ run(id: "${run.id}") { id } }` }),
    });
    assert.is(graphql.status, 200, await graphql.clone().text());
    assert.equal(((await graphql.json()) as { data: { run: { id: string } } }).data.run.id, run.id);
    assert.ok(loadedPackages(file).has('@apollo/server'), 'the first GraphQL request built the GraphQL API');
    assertAbsent(
      after,
      ['@ai-sdk/anthropic', '@ai-sdk/google', '@ai-sdk/google-vertex', '@ai-sdk/azure', '@openrouter/ai-sdk-provider', 'undici', /^@temporalio\//],
      'after an openai step',
    );
  } finally {
    await svc.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('ENGINE=temporal loads the Temporal SDK but no provider SDK, page or OpenTelemetry SDK at idle', async () => {
  const address = temporalAddress('loaded modules');
  if (!address) return;
  const dir = mkdtempSync(join(tmpdir(), 'wr-modules-'));
  const file = join(dir, 'modules.txt');
  writeFileSync(file, '');
  const svc = await startDemoService(
    { LOADED_MODULES_FILE: file, ENGINE: 'temporal', TEMPORAL_ADDRESS: address, TEMPORAL_TASK_QUEUE: `loaded-modules-${process.pid}` },
    { nodeOptions: HOOK, upWithinMs: 120_000 },
  );
  try {
    const idle = loadedPackages(file);
    assert.ok(idle.has('@temporalio/client') && idle.has('@temporalio/worker'), 'the client and the in-process worker are loaded');
    assertAbsent(idle, [...FOR_STEPS_OR_PAGES, ...OTEL_SDK, '@temporalio/interceptors-opentelemetry'], 'an idle ENGINE=temporal process');
  } finally {
    await svc.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test.run();
