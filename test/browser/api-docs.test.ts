import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { Browser, Page } from 'playwright-core';
import { launchChromium, runInGraphiql } from '../helpers/browser.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';

/**
 * The browser pages (docs/design/api-docs.md) in headless Chromium against the real service: the API
 * reference at /docs lists the operations, GraphiQL at /graphql runs a query with the token set in its
 * Headers editor, every request either page makes goes to this server, and the Content-Security-Policy
 * blocks nothing they need. Plus the HTTP side: content types, caching, CSP, and /graphql for API clients
 * as before.
 */

const TOKEN = 'test-internal-token-123456';

interface Ctx {
  t: TestApp;
  browser: Browser | null;
  /** Why Chromium did not start: each browser test fails with it. */
  launchError?: Error;
}
const t = suite<Ctx>('API reference and GraphQL explorer');

t.before(async (ctx) => {
  ctx.t = await startTestApp();
  ctx.browser = await launchChromium().catch((err: Error) => {
    console.error(`\n  ${err.message}`);
    ctx.launchError = err;
    return null;
  });
});
t.after(async (ctx) => {
  await ctx.browser?.close();
  await ctx.t?.close();
});

/** A page that records every request it makes and every console error (CSP violations included). */
async function openPage(ctx: Ctx): Promise<{ page: Page; urls: string[]; errors: string[] } | null> {
  if (ctx.launchError) throw ctx.launchError;
  if (!ctx.browser) return null;
  const page = await ctx.browser.newPage({ viewport: { width: 1400, height: 900 } });
  const urls: string[] = [];
  const errors: string[] = [];
  page.on('request', (r) => urls.push(r.url()));
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(m.text());
  });
  page.on('pageerror', (e) => errors.push(e.message));
  return { page, urls, errors };
}

function assertOnlyThisServer(urls: string[], origin: string): void {
  assert.ok(urls.length > 0);
  const elsewhere = urls.filter((u) => !u.startsWith(`${origin}/`) && !u.startsWith('data:'));
  assert.equal(elsewhere, [], 'every request goes to the test server');
}

t('/docs renders the API reference in Chromium: the operations and the /runs paths are visible, nothing is loaded from elsewhere', async (ctx) => {
  const p = await openPage(ctx);
  if (!p) return;
  try {
    await p.page.goto(`${ctx.t.url}/docs`);
    for (const op of ['Start an asynchronous run', "Get a run's status and outputs", 'Cancel a run', 'List runnable workflows']) {
      await p.page.getByText(op, { exact: true }).first().waitFor({ state: 'visible', timeout: 60_000 });
    }
    await p.page.getByText('Start an asynchronous run', { exact: true }).first().click();
    await p.page.getByText('/runs', { exact: true }).first().waitFor({ state: 'visible', timeout: 30_000 });
    assert.ok(await p.page.getByText('Prefer: wait=10').first().isVisible(), 'the request example shows the Prefer header');
    assert.ok(
      p.urls.some((u) => u.endsWith('/v1/openapi.json')),
      'the document is read from /v1/openapi.json',
    );
    assertOnlyThisServer(p.urls, ctx.t.url);
    assert.equal(p.errors, [], 'no console errors (a CSP violation is one)');
  } finally {
    await p.page.close();
  }
});

t('GraphiQL at /graphql runs a query with the token set in its Headers editor, from this server only', async (ctx) => {
  const p = await openPage(ctx);
  if (!p) return;
  try {
    const text = await runInGraphiql(p.page, ctx.t.url, '{ account(handle: "alice") { handle } }', TOKEN, '"alice"');
    assert.match(text, /"data"/);
    assert.match(text, /"handle": "alice"/);
    assertOnlyThisServer(p.urls, ctx.t.url);
    // Before the token is set the schema fetch is 401: the only errors allowed.
    assert.equal(
      p.errors.filter((e) => !/status of 401/.test(e)),
      [],
      'no console errors besides the 401 before the token was set',
    );
  } finally {
    await p.page.close();
  }
});

t("a subscription typed into GraphiQL streams the run's events over graphql-sse (/graphql/stream)", async (ctx) => {
  const p = await openPage(ctx);
  if (!p) return;
  try {
    const started = await ctx.t.call('POST', '/runs', { body: { workflow: 'aaaaaaaa-0000-4000-8000-000000000001', inputs: { topic: 'owls' } } });
    assert.is(started.status, 202);
    const text = await runInGraphiql(p.page, ctx.t.url, `subscription { runEvents(runId: "${started.body.run.id}") { sequence type } }`, TOKEN, '"run.queued"');
    assert.match(text, /"sequence": 1/);
    assert.ok(
      p.urls.some((u) => u === `${ctx.t.url}/graphql/stream`),
      'sent to the SSE endpoint',
    );
    assertOnlyThisServer(p.urls, ctx.t.url);
  } finally {
    await p.page.close();
  }
});

t('the pages and assets have the right content types, caching and CSP; unknown assets are 404', async ({ t: app }) => {
  const docs = await fetch(`${app.url}/docs`);
  assert.is(docs.status, 200);
  assert.is(docs.headers.get('content-type'), 'text/html; charset=utf-8');
  assert.is(docs.headers.get('cache-control'), 'no-cache');
  const csp = docs.headers.get('content-security-policy') ?? '';
  assert.match(csp, /default-src 'self'/);
  assert.match(csp, /script-src 'self'(;|$)/);
  assert.not.match(csp, /https?:\/\/(?!localhost[:/])/, 'no other origin is allowed');
  const html = await docs.text();
  const script = /src="(\/docs\/assets\/[^"]+\/scalar\.js)"/.exec(html)?.[1];
  assert.ok(script, html);
  const asset = await fetch(`${app.url}${script}`, { headers: { 'accept-encoding': 'gzip' } });
  assert.is(asset.status, 200);
  assert.is(asset.headers.get('content-type'), 'text/javascript; charset=utf-8');
  assert.is(asset.headers.get('cache-control'), 'public, max-age=31536000, immutable');
  assert.is(asset.headers.get('content-encoding'), 'gzip');
  const etag = asset.headers.get('etag')!;
  assert.ok((await asset.arrayBuffer()).byteLength > 100_000);
  const again = await fetch(`${app.url}${script}`, { headers: { 'if-none-match': etag } });
  assert.is(again.status, 304);
  const explorer = await fetch(`${app.url}/graphql`, { headers: { accept: 'text/html' } });
  const css = /href="(\/docs\/assets\/[^"]+\/graphiql\.css)"/.exec(await explorer.text())?.[1];
  assert.is((await fetch(`${app.url}${css}`)).headers.get('content-type'), 'text/css; charset=utf-8');
  for (const path of ['/docs/assets/x/nope.js', '/docs/assets/x/../../package.json', '/docs/other']) {
    const res = await fetch(`${app.url}${path}`);
    assert.is(res.status, 404, path);
    assert.is(((await res.json()) as { error: { code: string } }).error.code, 'not_found');
  }
  const post = await fetch(`${app.url}/docs`, { method: 'POST' });
  assert.is(post.status, 405);
  assert.is(post.headers.get('allow'), 'GET, HEAD');
});

t('/graphql answers API clients as before: 401 without the token, JSON for a GET query with it', async ({ t: app }) => {
  const page = await fetch(`${app.url}/graphql`, { headers: { accept: 'text/html' } });
  assert.is(page.status, 200, 'a browser gets the explorer without a token');
  const anonymous = await fetch(`${app.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query: '{ __typename }' }),
  });
  assert.is(anonymous.status, 401);
  const q = encodeURIComponent('{ account(handle: "alice") { handle } }');
  for (const accept of ['application/json', 'application/graphql-response+json, text/html']) {
    const res = await fetch(`${app.url}/graphql?query=${q}`, { headers: { accept, authorization: `Bearer ${TOKEN}`, 'apollo-require-preflight': 'true' } });
    assert.is(res.status, 200, accept);
    assert.equal(await res.json(), { data: { account: { handle: 'alice' } } });
  }
  const noToken = await fetch(`${app.url}/graphql?query=${q}`, { headers: { accept: 'application/json' } });
  assert.is(noToken.status, 401);
});

t.run();
