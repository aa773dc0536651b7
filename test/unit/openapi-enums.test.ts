import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { parse } from 'yaml';
import { CREDENTIAL_MODES, RUN_MODELS, USER_ACCESS } from '../../src/db/entities/index.ts';
import { ERROR_STATUS, RESERVED_ERROR_CODES } from '../../src/domain/errors.ts';
import { BILLING_STATUSES, LIST_STATUSES, OUTCOMES, QUEUE_STATES, RUN_STATUSES, TERMINAL_STATUSES } from '../../src/domain/run-status.ts';

/**
 * The OpenAPI document spells the enumerations again (it is a static file): each must equal the typed
 * list the code uses (src/domain/run-status.ts, the entities), in the same order. And every error code
 * it documents is raised somewhere in src/ or listed as reserved (docs/design/rules.md), never both.
 */

type Json = Record<string, any>;
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const doc = parse(readFileSync(join(ROOT, 'openapi/openapi.yaml'), 'utf8')) as Json;
const schemas = doc.components.schemas as Json;

const enumOf = (schema: Json): unknown[] => schema.enum;
const parameter = (path: string, name: string): Json => doc.paths[path].get.parameters.find((p: Json) => p.name === name).schema;

test('the OpenAPI enumerations of a run equal the typed lists of src/domain/run-status.ts', () => {
  assert.equal(enumOf(schemas.PublicRunStatus), [...RUN_STATUSES]);
  assert.equal(enumOf(schemas.RunListStatus), [...LIST_STATUSES]);
  assert.equal(enumOf(parameter('/runs', 'status')), [...LIST_STATUSES]);
  assert.equal(enumOf(schemas.BillingStatus), [...BILLING_STATUSES]);
  assert.equal(enumOf(schemas.RunOutcome), [...OUTCOMES, null]);
  assert.equal(enumOf(schemas.RunQueue.properties.state), [...QUEUE_STATES]);
  assert.equal(
    enumOf(schemas.RunWebhookPayload.properties.type),
    TERMINAL_STATUSES.map((status) => `run.${status}`),
  );
});

test('the OpenAPI enumerations of a workflow equal the entities’ lists', () => {
  assert.equal(enumOf(schemas.RunModel), [...RUN_MODELS]);
  assert.equal(enumOf(schemas.UserAccess), [...USER_ACCESS]);
  assert.equal(enumOf(schemas.CredentialMode), [...CREDENTIAL_MODES]);
});

/** The codes `new ApiError('…'` names anywhere in the service's sources (the CLI package aside). */
function raisedCodes(): Set<string> {
  const files = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) return entry.name === 'client' || entry.name === 'node_modules' ? [] : files(path);
      return entry.name.endsWith('.ts') ? [path] : [];
    });
  const codes = new Set<string>();
  for (const file of files(join(ROOT, 'src'))) {
    for (const match of readFileSync(file, 'utf8').matchAll(/new ApiError\(\s*'([a-z_]+)'/g)) codes.add(match[1]!);
  }
  return codes;
}

test('every documented error code is raised somewhere in src/ or listed as reserved, never both', () => {
  const documented = enumOf(schemas.ErrorCode) as string[];
  assert.equal([...documented].sort(), Object.keys(ERROR_STATUS).sort(), 'the ErrorCode enum is the taxonomy of src/domain/errors.ts');
  const raised = raisedCodes();
  for (const code of documented) {
    const reserved = RESERVED_ERROR_CODES.includes(code as never);
    assert.ok(raised.has(code) !== reserved, `${code}: ${reserved ? 'reserved but raised' : 'never raised and not listed as reserved'}`);
  }
});

test('the OpenAPI document says each reserved code is reserved', () => {
  const description = String(schemas.ErrorCode.description).replace(/\s+/g, ' ');
  const [, reservedPart = ''] = description.split('Reserved, listed by the spec but never answered by this service:');
  for (const code of RESERVED_ERROR_CODES) assert.ok(reservedPart.includes(`\`${code}\``), `ErrorCode's description lists ${code} as reserved`);
  assert.ok(RESERVED_ERROR_CODES.length > 0 || reservedPart === '', 'no code is described as reserved when none is');
});

test.run();
