import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { gzip } from 'node:zlib';

/**
 * The browser files of the API reference and the GraphQL explorer (docs/design/api-docs.md), served
 * from the npm packages in node_modules and from this folder: nothing comes from a CDN. Each is read
 * on first use and named by a hash of its content (`/docs/assets/<hash>/<file>`), so a cached copy
 * can be kept for a year and a new package version gets a new URL.
 */

const here = (file: string) => fileURLToPath(new URL(file, import.meta.url));
const gzipAsync = promisify(gzip);

const FILES = {
  'scalar.js': () => packageFile('@scalar/api-reference', 'dist/browser/standalone.js'),
  'react.js': () => packageFile('react', 'umd/react.production.min.js'),
  'react-dom.js': () => packageFile('react-dom', 'umd/react-dom.production.min.js'),
  'graphiql.js': () => packageFile('graphiql', 'graphiql.min.js'),
  'graphiql.css': () => packageFile('graphiql', 'graphiql.min.css'),
  'graphql-sse.js': () => packageFile('graphql-sse', 'umd/graphql-sse.min.js'),
  'graphiql-start.js': () => here('./graphiql-start.js'),
  'docs.css': () => here('./docs.css'),
} as const;

export type AssetName = keyof typeof FILES;

interface Asset {
  body: Buffer;
  gzipped?: Promise<Buffer>;
  etag: string;
  type: string;
}

const loaded = new Map<AssetName, Asset>();

/** A file of an installed package by its path in the package (their `exports` do not list the browser builds). */
function packageFile(pkg: string, file: string): string {
  const entry = fileURLToPath(import.meta.resolve(pkg));
  const root = entry.slice(0, entry.lastIndexOf(`/node_modules/${pkg}/`) + `/node_modules/${pkg}/`.length);
  return `${root}${file}`;
}

function load(name: AssetName): Asset {
  let asset = loaded.get(name);
  if (!asset) {
    const body = readFileSync(FILES[name]());
    const hash = createHash('sha256').update(body).digest('base64url').slice(0, 16);
    const type = name.endsWith('.css') ? 'text/css; charset=utf-8' : 'text/javascript; charset=utf-8';
    asset = { body, etag: `"${hash}"`, type };
    loaded.set(name, asset);
  }
  return asset;
}

/** The URL path of an asset, with its content hash. */
export function assetPath(name: AssetName): string {
  return `/docs/assets/${load(name).etag.slice(1, -1)}/${name}`;
}

/**
 * Serves `/docs/assets/<hash>/<name>`; returns false for any other path. A stale hash is still
 * served (a page cached across an upgrade), but only briefly cached.
 */
export async function serveAsset(req: IncomingMessage, res: ServerResponse, path: string): Promise<boolean> {
  const m = /^\/docs\/assets\/([\w-]+)\/([\w.-]+)$/.exec(path);
  if (!m || !Object.hasOwn(FILES, m[2])) return false;
  const asset = load(m[2] as AssetName);
  const current = `"${m[1]}"` === asset.etag;
  const headers: Record<string, string> = {
    'Content-Type': asset.type,
    'Cache-Control': current ? 'public, max-age=31536000, immutable' : 'public, max-age=300',
    ETag: asset.etag,
    'X-Content-Type-Options': 'nosniff',
    Vary: 'Accept-Encoding',
  };
  if (req.headers['if-none-match'] === asset.etag) {
    res.writeHead(304, headers).end();
    return true;
  }
  let body = asset.body;
  if (/\bgzip\b/.test(String(req.headers['accept-encoding'] ?? ''))) {
    body = await (asset.gzipped ??= gzipAsync(asset.body, { level: 6 }));
    headers['Content-Encoding'] = 'gzip';
  }
  headers['Content-Length'] = String(body.length);
  res.writeHead(200, headers);
  res.end(req.method === 'HEAD' ? undefined : body);
  return true;
}
