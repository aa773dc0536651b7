import type { IncomingMessage, ServerResponse } from 'node:http';
import { ApiError } from '../../domain/errors.ts';
import type { HttpServer } from '../server.ts';
import { assetPath, serveAsset } from './assets.ts';

/**
 * The browser pages (docs/design/api-docs.md): the REST API reference at `GET /docs` (Scalar, reading
 * `/v1/openapi.json`) and the GraphQL explorer (GraphiQL) that `GET /graphql` shows a browser. Every
 * script, style and font comes from this server; the Content-Security-Policy allows nothing else.
 */

/** This server only. Styles may be inline (both UIs inject style elements at runtime); scripts may not. */
export function contentSecurityPolicy(apiOrigin: string): string {
  const connect = apiOrigin ? `'self' ${apiOrigin}` : "'self'";
  return [
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "font-src 'self' data:",
    `connect-src ${connect}`,
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; ');
}

// Scalar's options: no web fonts, telemetry, AI agent, MCP or developer toolbar (they call out to scalar.com).
const SCALAR_CONFIG = {
  withDefaultFonts: false,
  telemetry: false,
  showDeveloperTools: 'never',
  agent: { disabled: true },
  mcp: { disabled: true },
  defaultOpenAllTags: true,
};

const attr = (text: string) => text.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;');

function html(title: string, head: string, body: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>${title}</title>
${head}</head>
<body>
${body}</body>
</html>
`;
}

const docsPage = () =>
  html(
    'Workflow Run API reference',
    '',
    `<script id="api-reference" data-url="/v1/openapi.json" data-configuration="${attr(JSON.stringify(SCALAR_CONFIG))}"></script>
<script src="${assetPath('scalar.js')}"></script>
`,
  );

const explorerPage = () =>
  html(
    'GraphQL explorer (internal)',
    `<link rel="stylesheet" href="${assetPath('graphiql.css')}">
<link rel="stylesheet" href="${assetPath('docs.css')}">
`,
    `<div id="graphiql">Loading the GraphQL explorer…</div>
${(['react.js', 'react-dom.js', 'graphiql.js', 'graphql-sse.js', 'graphiql-start.js'] as const)
  .map((f) => `<script src="${assetPath(f)}"></script>\n`)
  .join('')}`,
  );

let docsHtml: string | undefined;
let explorerHtml: string | undefined;

function sendPage(req: IncomingMessage, res: ServerResponse, html: string, apiOrigin: string): void {
  res.writeHead(200, {
    'Content-Type': 'text/html; charset=utf-8',
    'Content-Length': Buffer.byteLength(html),
    // Small and naming the current asset hashes: always revalidated.
    'Cache-Control': 'no-cache',
    'Content-Security-Policy': contentSecurityPolicy(apiOrigin),
    'X-Content-Type-Options': 'nosniff',
    'Referrer-Policy': 'no-referrer',
  });
  res.end(req.method === 'HEAD' ? undefined : html);
}

/** A browser navigating to /graphql: a GET for HTML that does not also accept a JSON answer. */
export function wantsExplorer(req: IncomingMessage): boolean {
  if (req.method !== 'GET' && req.method !== 'HEAD') return false;
  const accept = String(req.headers.accept ?? '');
  return /\btext\/html\b/i.test(accept) && !/\bapplication\/(graphql-response\+)?json\b/i.test(accept);
}

export function sendExplorer(req: IncomingMessage, res: ServerResponse, apiOrigin: string): void {
  sendPage(req, res, (explorerHtml ??= explorerPage()), apiOrigin);
}

/** `GET /docs` and `/docs/assets/…`, unauthenticated (the pages hold no data; the APIs they call check keys). */
export function mountDocs(http: HttpServer, apiOrigin: () => string): void {
  http.mount('/docs', async (req, res, ctx) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      throw new ApiError('method_not_allowed', `${req.method} is not allowed on ${ctx.path}; allowed: GET, HEAD`, { allow: ['GET', 'HEAD'] });
    }
    if (ctx.path === '/docs' || ctx.path === '/docs/') {
      return sendPage(req, res, (docsHtml ??= docsPage()), apiOrigin());
    }
    if (!(await serveAsset(req, res, ctx.path))) throw new ApiError('not_found', `no route for ${req.method} ${ctx.path}`);
  });
}
