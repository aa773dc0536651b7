import { Agent } from 'undici';
import { traceStepKind, tracedFetch } from '../../observability/trace-spans.ts';
import { assertPublicUrl, BlockedAddressError, guardedLookup, HostLookupError, parseHttpUrl } from '../../security/net-guard.ts';
import type { NodeExecutionContext, NodeOutcome } from './types.ts';
import { timeStep } from '../../observability/metrics.ts';

/**
 * The `http.request` activity (docs/design/graph-language.md): renders url, header values and body, sends the request
 * with the global fetch, follows up to 5 redirects itself (each target re-checked by the SSRF guard),
 * fails on non-2xx, and returns the response body as text, emitted as a single delta at the end.
 *
 * SSRF (unless `allowPrivateNetwork`): every URL is pre-checked with `assertPublicUrl`, and the
 * connection goes through an undici Agent whose `connect.lookup` is `guardedLookup`, so the address
 * actually connected to is checked too (DNS rebinding). `undici` is imported from node_modules, where
 * it is installed as a dependency of the AI SDK's provider-utils; it should be listed in package.json.
 */

export const HTTP_TIMEOUT_MS = 30_000;
export const HTTP_MAX_RESPONSE_BYTES = 1024 * 1024;
export const HTTP_MAX_REDIRECTS = 5;

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);
const REDIRECTS = new Set([301, 302, 303, 307, 308]);
/** Headers a cross-origin redirect must not carry to the next host (they may hold the caller's secrets). */
const CREDENTIAL_HEADERS = ['authorization', 'cookie', 'proxy-authorization'];
const BODY_HEADERS = ['content-type', 'content-length', 'content-encoding', 'content-language', 'content-location'];

let guardedAgent: Agent | undefined;
function guardedDispatcher(): Agent {
  guardedAgent ??= new Agent({ connect: { lookup: guardedLookup } });
  return guardedAgent;
}

class RequestFailure extends Error {}

function abortError(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  if (reason instanceof Error && reason.name === 'AbortError') return reason;
  return new DOMException('the node was cancelled', 'AbortError');
}

function failed(reason: string): NodeOutcome {
  return { status: 'failed', reason };
}

function findInChain<T>(error: unknown, match: (e: unknown) => e is T): T | undefined {
  let current: unknown = error;
  for (let i = 0; i < 6 && current != null; i++) {
    if (match(current)) return current;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

async function readLimited(res: Response, limit: number): Promise<string> {
  const declared = Number(res.headers.get('content-length'));
  if (Number.isFinite(declared) && declared > limit) {
    await res.body?.cancel().catch(() => undefined);
    throw new RequestFailure('the HTTP response exceeded the 1 MiB size limit');
  }
  if (!res.body) return '';
  const reader: ReadableStreamDefaultReader<Uint8Array> = res.body.getReader();
  const decoder = new TextDecoder('utf-8');
  let size = 0;
  let text = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => undefined);
      throw new RequestFailure('the HTTP response exceeded the 1 MiB size limit');
    }
    text += decoder.decode(value, { stream: true });
  }
  return text + decoder.decode();
}

/** Seams for tests; the engine calls `executeHttpRequest(ctx)` with the defaults. */
export interface HttpRequestDeps {
  /** The per-hop URL pre-check. Default: `assertPublicUrl` with `ctx.allowPrivateNetwork`. */
  assertUrl?: (url: string) => Promise<void>;
  timeoutMs?: number;
}

export function executeHttpRequest(ctx: NodeExecutionContext, deps: HttpRequestDeps = {}): Promise<NodeOutcome> {
  return timeStep('http.request', (c) => request(c, deps), ctx);
}

async function request(ctx: NodeExecutionContext, deps: HttpRequestDeps): Promise<NodeOutcome> {
  const node = ctx.node;
  if (node.kind !== 'http.request') return failed('the node is not an http.request node');
  const spec = node;
  traceStepKind(node.kind);
  if (ctx.signal.aborted) throw abortError(ctx.signal);

  let method = (spec.method ?? 'GET').trim().toUpperCase();
  if (!METHODS.has(method)) return failed(`the HTTP method ${JSON.stringify(spec.method)} is not supported`);

  let url: URL;
  try {
    url = parseHttpUrl(ctx.render(spec.url).trim());
  } catch (error) {
    return failed(error instanceof BlockedAddressError ? error.message : 'the URL is not valid');
  }
  if (url.username || url.password) return failed('URLs with credentials are not supported; send them in a header');

  let headers: Headers;
  try {
    headers = new Headers();
    for (const [name, template] of Object.entries(spec.headers ?? {})) headers.set(name, ctx.render(template));
  } catch {
    return failed('the request headers are not valid');
  }
  let body: string | undefined = spec.body !== undefined ? ctx.render(spec.body) : undefined;
  if (body !== undefined && (method === 'GET' || method === 'HEAD')) {
    if (body === '') body = undefined;
    else return failed(`a ${method} request cannot have a body`);
  }

  const timeoutMs = deps.timeoutMs ?? HTTP_TIMEOUT_MS;
  const assertUrl = deps.assertUrl ?? ((u: string) => assertPublicUrl(u, { allowPrivateNetwork: ctx.allowPrivateNetwork }));
  const timeout = AbortSignal.timeout(timeoutMs);
  const signal = AbortSignal.any([ctx.signal, timeout]);
  const dispatcher = ctx.allowPrivateNetwork ? undefined : guardedDispatcher();
  const send = tracedFetch(); // a client span per hop, traceparent sent onward (the global fetch when tracing is off)

  let text: string;
  try {
    let res: Response;
    for (let redirects = 0; ; redirects++) {
      await assertUrl(url.href);
      const init: RequestInit & { dispatcher?: unknown } = { method, headers, body, redirect: 'manual', signal };
      if (dispatcher) init.dispatcher = dispatcher;
      res = await send(url, init);
      const location = res.headers.get('location');
      if (!REDIRECTS.has(res.status) || location === null) break;
      await res.body?.cancel().catch(() => undefined);
      if (redirects >= HTTP_MAX_REDIRECTS) return failed(`the HTTP request was redirected more than ${HTTP_MAX_REDIRECTS} times`);

      let next: URL;
      try {
        next = parseHttpUrl(new URL(location, url).href);
      } catch (error) {
        return failed(
          error instanceof BlockedAddressError
            ? `the HTTP request was redirected to a URL that is not allowed: ${error.message}`
            : 'the HTTP request was redirected to an invalid URL',
        );
      }
      if (next.username || next.password) return failed('the HTTP request was redirected to a URL with credentials');
      // Fetch-standard method rewriting: 303 (except HEAD), and 301/302 after POST, continue as GET without a body.
      if ((res.status === 303 && method !== 'HEAD') || ((res.status === 301 || res.status === 302) && method === 'POST')) {
        method = 'GET';
        body = undefined;
        headers = new Headers(headers);
        for (const h of BODY_HEADERS) headers.delete(h);
      }
      if (next.origin !== url.origin) {
        headers = new Headers(headers);
        for (const h of CREDENTIAL_HEADERS) headers.delete(h);
      }
      url = next;
    }

    if (res.status < 200 || res.status > 299) {
      await res.body?.cancel().catch(() => undefined);
      return failed(`the HTTP request failed with status ${res.status}`);
    }
    text = await readLimited(res, HTTP_MAX_RESPONSE_BYTES);
  } catch (error) {
    if (ctx.signal.aborted) throw abortError(ctx.signal);
    if (timeout.aborted) return failed(`the HTTP request timed out after ${timeoutMs / 1000} seconds`);
    if (error instanceof RequestFailure) return failed(error.message);
    const blocked = findInChain(error, (e): e is BlockedAddressError => e instanceof BlockedAddressError);
    if (blocked) return failed(blocked.message);
    const lookup = findInChain(
      error,
      (e): e is Error => e instanceof HostLookupError || (e as { code?: unknown }).code === 'ENOTFOUND' || (e as { code?: unknown }).code === 'EAI_AGAIN',
    );
    if (lookup) return failed('the host name of the URL could not be resolved');
    return failed('the HTTP request could not be completed (connection failed)');
  }
  if (ctx.signal.aborted) throw abortError(ctx.signal);
  // Outside the try: an error from the engine's delta sink is the engine's, not a request failure.
  if (text) await ctx.onDelta(text);
  return { status: 'completed', value: text };
}
