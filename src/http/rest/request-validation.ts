// eslint-disable-next-line no-restricted-imports -- Ajv documents ajv/dist/2020 as its JSON Schema 2020-12 entry; its main one is draft-07
import { Ajv2020, type ErrorObject, type Options } from 'ajv/dist/2020.js';
import ajvFormats from 'ajv-formats';
import type { Context } from 'openapi-backend';
import { ApiError, notFound } from '../../domain/errors.ts';
import { DATE_TIME_RULE, isDateTime } from '../../domain/date-time.ts';
import { UUID } from '../../domain/ids.ts';
import { cancelAfterRefusal } from '../../domain/run-deadline.ts';
import { startAfterRefusal } from '../../domain/run-start.ts';

/**
 * Request validation against openapi/openapi.yaml (docs/design/rules.md, "Request parameters"): the
 * document is OpenAPI 3.1, so its schemas are JSON Schema 2020-12, compiled by Ajv 2020 with the
 * standard formats (`uuid`). A failure is answered with the spec's code for what failed: a path id
 * that is not a UUID is an unknown id (404), an event cursor is `invalid_cursor`, any other query or
 * header parameter `invalid_request`.
 */

/** openapi-backend's `customizeAjv`: the same options (it coerces query, path and header strings), on Ajv 2020. */
export function requestAjv(_ajv: unknown, options: Options): Ajv2020 {
  const ajv = new Ajv2020({ ...options, strict: false });
  // ajv-formats is CommonJS: under NodeNext its default import is module.exports, whose .default is the plugin.
  ajvFormats.default(ajv);
  // The service's UUID text form: ajv-formats also takes a `urn:uuid:` prefix, which Postgres does not.
  ajv.addFormat('uuid', UUID);
  // ajv-formats also takes `±hh`, `±hhmm` and a space for the `T`, which RFC 3339 does not.
  ajv.addFormat('date-time', isDateTime);
  return ajv;
}

const CURSORS = new Set(['afterSequence', 'last-event-id']);
const NO_NUL = '^[^\\x00]*$';
/** The document's pattern of an idempotency key: a character that JavaScript's trim() keeps. */
const NOT_BLANK = '[^\\t\\n\\v\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff]';

interface Parameter {
  name: string;
  in: string;
  schema?: { type?: string; minimum?: number; maximum?: number; enum?: string[]; format?: string; pattern?: string };
}

/** What validationError reads of a request: openapi-backend types its query and headers `any` (they are the request's as parsed). */
export type ValidatedContext = Context<unknown, unknown, Record<string, unknown>, Partial<Record<string, string | string[]>>>;

/** The error a failed validation answers, for openapi-backend's `validationFail`. */
export function validationError(api: ValidatedContext): ApiError {
  const operation = api.operation;
  const parameters = (operation.parameters ?? []) as Parameter[];
  const failure = (api.validation.errors ?? [])[0] as ErrorObject | undefined;
  const [, where = '', raw = '', member] = (failure?.instancePath ?? '').split('/');
  if (where === 'path') return notFound(operation.path.startsWith('/workflows') ? 'workflow' : 'run');
  const unknown = failure?.keyword === 'additionalProperties' ? String(failure.params.additionalProperty) : undefined;
  if (unknown !== undefined) {
    const allowed = parameters.filter((p) => p.in === 'query').map((p) => p.name);
    return new ApiError('invalid_request', `unknown query parameter "${unknown}"; allowed: ${allowed.join(', ') || 'none'}`);
  }
  const name = decodePointer(raw);
  const parameter = parameters.find((p) => p.in === where && (where === 'header' ? p.name.toLowerCase() : p.name) === name);
  const refuse = (message: string) => (CURSORS.has(name) ? new ApiError('invalid_cursor', message) : new ApiError('invalid_request', message));
  // The document's pattern is the whole rule; the refusal says which part was missed.
  if (where === 'header' && name === 'cancel-after') return cancelAfterRefusal(String(api.request.headers['cancel-after'] ?? ''));
  if (where === 'header' && name === 'start-after') return startAfterRefusal(String(api.request.headers['start-after'] ?? ''));
  const given = api.request.query[name];
  // A member of an object parameter (`metadata[KEY]`): its value, or its key (propertyNames).
  const key = member === undefined ? failure?.propertyName : decodePointer(member);
  if (key !== undefined && where === 'query') {
    const label = `${parameter?.name ?? name}[${key}]`;
    const value = (given as Record<string, unknown>)[key];
    if (Array.isArray(value)) return refuse(`query parameter "${label}" is given more than once`);
    if (failure?.propertyName !== undefined) return refuse(`the key of ${label} ${failure.message ?? 'is invalid'}`);
    return refuse(`${label} ${failure?.keyword === 'pattern' ? 'must not contain NUL characters' : (failure?.message ?? 'is invalid')}`);
  }
  const label = parameter?.name ?? name;
  if (Array.isArray(given) && where === 'query') return refuse(`query parameter "${label}" is given more than once`);
  return refuse(`${label} ${ruleOf(parameter?.schema, failure)}`);
}

/** An integer as the document means it: decimal digits, no sign on 0, no leading zero, point, exponent or space. */
const INTEGER_TEXT = /^(?:0|-?[1-9][0-9]*)$/;

/**
 * Ajv reads a parameter's text for an integer schema as JavaScript's Number() does (`0x10`, `1e1`, ` 10`,
 * `+10`, `10.0`, `-0` and `5\n` all pass); the document takes integers written plainly. Run once the
 * document's validation passed: the refusal of an integer parameter whose text is not written so.
 */
export function integerTextError(api: Context, query: URLSearchParams, headers: Record<string, string | string[] | undefined>): ApiError | null {
  for (const parameter of (api.operation.parameters ?? []) as Parameter[]) {
    if (parameter.schema?.type !== 'integer') continue;
    const text = parameter.in === 'query' ? query.get(parameter.name) : parameter.in === 'header' ? headers[parameter.name.toLowerCase()] : undefined;
    if (typeof text !== 'string' || INTEGER_TEXT.test(text)) continue;
    const message = `${parameter.name} ${ruleOf(parameter.schema, undefined)}, written in decimal digits`;
    const name = parameter.in === 'header' ? parameter.name.toLowerCase() : parameter.name;
    return new ApiError(CURSORS.has(name) ? 'invalid_cursor' : 'invalid_request', message);
  }
  return null;
}

/** The parameter's rule in words, from its schema. */
function ruleOf(schema: Parameter['schema'], failure: ErrorObject | undefined): string {
  if (schema?.type === 'integer') {
    const max = schema.maximum === undefined ? '' : ` to ${schema.maximum}`;
    return max ? `must be an integer from ${schema.minimum ?? 0}${max}` : `must be an integer >= ${schema.minimum ?? 0}`;
  }
  if (schema?.enum) return `must be one of: ${schema.enum.join(', ')}`;
  if (schema?.format === 'uuid') return 'must be a UUID';
  if (schema?.format === 'date-time') return DATE_TIME_RULE;
  if (schema?.type === 'object' && failure?.keyword === 'type') return 'must be given as name[KEY]=VALUE pairs';
  // The document states "no NUL" as a pattern, so fuzzers draw only storable text; said in words here.
  if (failure?.keyword === 'pattern' && schema?.pattern === NO_NUL) return 'must not contain NUL characters';
  if (failure?.keyword === 'pattern' && schema?.pattern === NOT_BLANK) return 'must not be empty after trimming surrounding whitespace';
  return failure?.message ?? 'is invalid';
}

/** A JSON Pointer token (RFC 6901). */
const decodePointer = (token: string) => token.replace(/~1/g, '/').replace(/~0/g, '~');
