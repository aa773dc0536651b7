import type { ProfileSummary } from './shared.ts';

/**
 * Summarises a V8 CPU profile (node:inspector Profiler.stop) by self time: per category (which library
 * or which part of src/ the sampled function belongs to) and per function. Idle time is left out.
 */

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
}
export interface CpuProfile {
  nodes: ProfileNode[];
  samples?: number[];
  timeDeltas?: number[];
}

export function categoryOf(frame: CallFrame): string {
  const { url, functionName } = frame;
  if (!url) {
    if (functionName === '(garbage collector)') return 'GC';
    if (functionName === '(program)') return 'V8/native (program)';
    if (functionName === '(idle)' || functionName === '(root)') return '(idle)';
    // Native stream writes are the write(2) calls to sockets (the database connection, HTTP responses).
    if (/^write(Buffer|Utf8String|Latin1String|AsciiString|v|Generic)$/.test(functionName)) return 'socket writes (native write calls)';
    if (functionName === 'runMicrotasks') return 'microtask queue (native)';
    return 'V8 builtins and natives (JSON, RegExp, …)';
  }
  if (url.startsWith('wasm://')) return 'PGlite (Postgres in WASM)';
  const u = decodeURIComponent(url);
  const nm = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(u);
  if (nm) {
    const pkg = nm[1]!;
    if (pkg === 'pg' || pkg.startsWith('pg-')) return 'pg driver (pg, pg-protocol, pg-pool)';
    if (pkg.startsWith('@electric-sql/pglite')) return 'PGlite (Postgres in WASM)';
    if (pkg.startsWith('@mikro-orm/')) return 'MikroORM';
    if (pkg === 'kysely') return 'kysely (under MikroORM)';
    if (pkg === 'openapi-backend' || pkg === 'ajv' || pkg === 'openapi-types') return 'openapi-backend (routing)';
    if (pkg === 'pino' || pkg.startsWith('pino-')) return 'pino (logging)';
    if (pkg === 'decimal.js') return 'decimal.js (money)';
    if (pkg === 'tsx' || pkg === 'esbuild') return 'tsx loader';
    return `node_modules/${pkg}`;
  }
  const src = /\/(src|bench)\/([^/]+)/.exec(u);
  if (src) return src[1] === 'bench' ? 'bench harness (not the service)' : `service code: src/${src[2]}`;
  if (u.startsWith('node:')) {
    const mod = u
      .slice('node:'.length)
      .replace(/^internal\//, '')
      .split('/')[0]!;
    return `node core: ${mod}`;
  }
  return 'other';
}

export function summariseProfile(profile: CpuProfile, top = 15): ProfileSummary {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  const samples = profile.samples ?? [];
  const deltas = profile.timeDeltas ?? [];
  // timeDeltas[i] is the time since the previous sample; it is charged to the sample that follows it.
  for (let i = 0; i < samples.length; i++) {
    const d = (deltas[i + 1] ?? deltas[i] ?? 0) / 1000;
    self.set(samples[i]!, (self.get(samples[i]!) ?? 0) + d);
  }
  const categories = new Map<string, number>();
  const functions = new Map<string, number>();
  let total = 0;
  for (const [id, ms] of self) {
    const node = byId.get(id);
    if (!node) continue;
    const cat = categoryOf(node.callFrame);
    if (cat === '(idle)') continue;
    total += ms;
    categories.set(cat, (categories.get(cat) ?? 0) + ms);
    const f = node.callFrame;
    const where = f.url ? `${shortUrl(f.url)}:${f.lineNumber + 1}` : '(native)';
    const name = `${f.functionName || '(anonymous)'} ${where}`;
    functions.set(name, (functions.get(name) ?? 0) + ms);
  }
  const sorted = (m: Map<string, number>) => [...m.entries()].sort((a, b) => b[1] - a[1]);
  return { totalMs: total, categories: sorted(categories), functions: sorted(functions).slice(0, top) };
}

function shortUrl(url: string): string {
  const u = decodeURIComponent(url).replace(/^file:\/\//, '');
  const nm = u.lastIndexOf('node_modules/');
  if (nm >= 0) return u.slice(nm + 'node_modules/'.length);
  const src = u.search(/\/(src|bench)\//);
  if (src >= 0) return u.slice(src + 1);
  return u;
}
