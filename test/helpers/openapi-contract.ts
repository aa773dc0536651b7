import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { OpenAPIBackend, type Document } from 'openapi-backend';
import { parse } from 'yaml';

/**
 * Validates a response against openapi/openapi.yaml: the operation must exist, the status must be
 * declared, every required declared header present, the JSON body valid for the declared schema and
 * X-Request-Id always there. Tests call this for every response so the document and the code cannot drift.
 */

const doc = parse(readFileSync(fileURLToPath(new URL('../../openapi/openapi.yaml', import.meta.url)), 'utf8')) as Document & Record<string, any>;
const ajv = new Ajv2020({ strict: false, allErrors: true });
(addFormats as unknown as (a: Ajv2020) => void)(ajv);
ajv.addSchema({ $id: 'openapi.json', components: doc.components ?? {} } as object);
const router = new OpenAPIBackend({ definition: doc, validate: false, quick: true, ignoreTrailingSlashes: false });
const ready = router.init();
const compiled = new Map<string, ReturnType<Ajv2020['compile']>>();

function rewriteRefs(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(rewriteRefs);
  if (schema && typeof schema === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(schema)) out[k] = k === '$ref' && typeof v === 'string' && v.startsWith('#/') ? `openapi.json${v}` : rewriteRefs(v);
    return out;
  }
  return schema;
}

function resolve(obj: any): any {
  if (obj && typeof obj.$ref === 'string') {
    return obj.$ref
      .slice(2)
      .split('/')
      .reduce((o: any, k: string) => o?.[k], doc);
  }
  return obj;
}

export function assertMatchesContract(method: string, pathname: string, res: { status: number; headers: Headers; body: unknown; text: string }): void {
  const fail = (msg: string) => {
    throw new Error(`OpenAPI contract: ${method.toUpperCase()} ${pathname} → ${res.status}: ${msg}\nbody: ${res.text.slice(0, 500)}`);
  };
  if (!res.headers.get('x-request-id')) fail('missing X-Request-Id');
  if (!pathname.startsWith('/v1')) return;
  const path = pathname.slice(3) || '/';
  void ready;
  const op = router.matchOperation({ method: method.toLowerCase(), path, headers: {}, query: {} } as never) as any;
  if (!op) {
    // Unknown routes and wrong methods still owe the error envelope.
    if (res.status !== 404 && res.status !== 405) fail('no such operation in the document');
    checkEnvelope(res.body, fail);
    return;
  }
  const responses = op.responses ?? {};
  const declared = resolve(responses[String(res.status)] ?? responses[`${String(res.status)[0]}XX`] ?? responses.default);
  if (!declared) fail(`status ${res.status} is not declared for ${op.operationId}`);
  for (const [name, h] of Object.entries<any>(declared.headers ?? {})) {
    if (resolve(h)?.required && !res.headers.get(name)) fail(`required header ${name} missing`);
  }
  const contentType = res.headers.get('content-type') ?? '';
  const media = declared.content?.['application/json'];
  if (media && contentType.includes('application/json')) {
    const key = `${op.operationId}:${res.status}`;
    let validate = compiled.get(key);
    if (!validate) {
      validate = ajv.compile(rewriteRefs(media.schema) as object);
      compiled.set(key, validate);
    }
    if (!validate(res.body)) fail(ajv.errorsText(validate.errors, { dataVar: 'body' }));
  } else if (res.status >= 400) {
    checkEnvelope(res.body, fail);
  }
}

function checkEnvelope(body: any, fail: (m: string) => void): void {
  if (!body || typeof body.error?.code !== 'string' || typeof body.error?.message !== 'string') fail('not the error envelope');
}

export async function contractReady(): Promise<void> {
  await ready;
}
