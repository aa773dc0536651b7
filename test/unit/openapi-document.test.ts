import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { parse } from 'yaml';
import { Ajv2020 } from 'ajv/dist/2020.js';
import ajvFormats from 'ajv-formats';
import { OpenAPIBackend } from 'openapi-backend';
import { CANCEL_AFTER_PATTERN, cancelAfterSeconds } from '../../src/domain/run-deadline.ts';

/**
 * Checks openapi/openapi.yaml: it parses, every component schema compiles as JSON Schema 2020-12,
 * operations carry x-scopes and X-Request-Id, samples validate (and near misses fail), embedded
 * examples match their schemas, and openapi-backend can route with it.
 */

type Json = Record<string, any>;

const DOC_PATH = fileURLToPath(new URL('../../openapi/openapi.yaml', import.meta.url));
const doc = parse(readFileSync(DOC_PATH, 'utf8')) as Json;
const BASE = 'https://workflow-run.test/openapi.yaml';

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

const OPERATION_IDS = [
  'listWorkflows',
  'getWorkflow',
  'listWorkflowVersions',
  'acceptWorkflowUpdate',
  'startRun',
  'startRuns',
  'listRuns',
  'getRun',
  'cancelRun',
  'rescheduleRun',
  'cancelRuns',
  'replayRun',
  'replayRuns',
  'listRunEvents',
  'streamRun',
  'getOpenApiDocument',
];

const EXPECTED_SCOPES: Record<string, string[]> = {
  listWorkflows: ['run:read', 'run:execute'],
  getWorkflow: ['run:read', 'run:execute'],
  listWorkflowVersions: ['run:read', 'run:execute'],
  acceptWorkflowUpdate: ['run:execute'],
  startRun: ['run:execute'],
  startRuns: ['run:execute'],
  listRuns: ['run:read', 'run:execute'],
  getRun: ['run:read', 'run:execute'],
  cancelRun: ['run:execute'],
  rescheduleRun: ['run:execute'],
  cancelRuns: ['run:execute'],
  replayRun: ['run:execute'],
  replayRuns: ['run:execute'],
  listRunEvents: ['run:read'],
  streamRun: ['run:read'],
  getOpenApiDocument: [],
};

// Ajv 2020 in strict-schema mode: unknown keywords (typos) and unknown formats are errors. The
// document's top-level OpenAPI keys are declared as inert keywords so the whole document can be
// registered once and every '#/components/schemas/…' reference resolves against it.
function makeAjv() {
  const ajv = new Ajv2020({ strict: true, strictTypes: false, strictRequired: false, allowUnionTypes: true, allErrors: true });
  // ajv-formats is CommonJS: under NodeNext its default import is module.exports, whose .default is the plugin.
  ajvFormats.default(ajv);
  ajv.addVocabulary(['openapi', 'info', 'jsonSchemaDialect', 'servers', 'security', 'tags', 'paths', 'webhooks', 'components']);
  ajv.addSchema(doc, BASE);
  return ajv;
}
const ajv = makeAjv();
const validators = new Map<string, ReturnType<typeof ajv.compile>>();
function validator(name: string) {
  let v = validators.get(name);
  if (!v) {
    v = ajv.compile({ $ref: `${BASE}#/components/schemas/${name}` });
    validators.set(name, v);
  }
  return v;
}
function ok(name: string, value: unknown): void {
  const v = validator(name);
  assert.ok(v(value), `${name} should accept the sample: ${ajv.errorsText(v.errors)}`);
}
function bad(name: string, value: unknown, why: string): void {
  assert.not.ok(validator(name)(value), `${name} should reject: ${why}`);
}

function resolve(node: any): any {
  let n = node;
  for (let i = 0; n && typeof n === 'object' && typeof n.$ref === 'string' && i < 10; i++) {
    assert.ok(n.$ref.startsWith('#/'), `only local refs expected: ${n.$ref}`);
    n = n.$ref
      .slice(2)
      .split('/')
      .map((p: string) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
      .reduce((o: any, k: string) => o?.[k], doc);
    assert.ok(n !== undefined, `dangling $ref ${node.$ref}`);
  }
  return n;
}

function operations(): { path: string; method: string; op: Json }[] {
  const out: { path: string; method: string; op: Json }[] = [];
  for (const [path, item] of Object.entries(doc.paths as Json)) {
    for (const method of METHODS) if ((item as Json)[method]) out.push({ path, method, op: (item as Json)[method] });
  }
  return out;
}

const RUN_ID = '3b2f6a8e-5d4c-4e1a-9f0b-7c6d5e4f3a2b';
const WF_ID = '1f7e2c1a-4b1e-4c55-9a51-0d6f0c1b2a10';
const VERSION_ID = '9a1b7c3d-2e4f-4a6b-8c0d-1e2f3a4b5c6d';
const BASE_URL = 'http://localhost:8080/v1';

const sampleRun = {
  id: RUN_ID,
  status: 'completed',
  reason: null,
  suspended: false,
  workflowId: WF_ID,
  workflowVersionId: VERSION_ID,
  startedAt: '2026-11-22T10:00:01.120Z',
  completedAt: '2026-11-22T10:00:04.870Z',
  displayedChargeUsd: 0.250437,
  billingStatus: 'settled',
  outcome: 'completed_with_issues',
  queue: null,
  outputs: [
    { nodeId: 'summary', name: 'Summary', type: 'text', value: '- point one\n- point two' },
    { nodeId: 'data', name: 'Data', type: 'json', value: { words: 42 }, extra: 'allowed' },
  ],
  metadata: { orderId: 'order-42', customer: 'acme' },
  deadline: null,
};

const sampleDetail = {
  id: WF_ID,
  name: 'Summarize article',
  description: null,
  ownerHandle: 'alice',
  serviceCode: null,
  runModel: 'per_run',
  displayedRunPriceUsd: 0.2502,
  pricingExplanation: 'Estimated price per run; settlement uses the live quote at run start.',
  userAccess: 'purchased',
  accessLabel: 'Purchased: runs are covered by your purchase (compute only)',
  apiRunnableNow: true,
  credentialMode: 'byok',
  requiredProviders: ['openai', 'anthropic'],
  apiAccessAllowed: true,
  purchaseUrl: `http://localhost:8080/marketplace/workflows/${WF_ID}`,
  versionId: VERSION_ID,
  versionLabel: 'v1',
  pinnedVersionId: VERSION_ID,
  activeVersionId: '5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b',
  updateAvailable: true,
  inputCount: 3,
  inputSchema: [
    { nodeId: 'url', name: 'Article URL', type: 'url', specId: 'input.url', required: true, placeholder: 'https://…' },
    { nodeId: 'apiKey', name: 'API key', type: 'password', specId: 'input.password', description: 'Used for this run only' },
    {
      nodeId: 'tone',
      name: 'Tone',
      type: 'dropdown',
      required: false,
      defaultValue: 'neutral',
      options: [
        { label: 'Neutral', value: 'neutral' },
        { label: 'Playful', value: 'playful' },
      ],
    },
  ],
  responseShape: {
    run: {
      id: '00000000-0000-0000-0000-000000000000',
      status: 'accepted',
      statusUrl: `${BASE_URL}/runs/00000000-0000-0000-0000-000000000000`,
      eventsUrl: `${BASE_URL}/runs/00000000-0000-0000-0000-000000000000/events`,
      streamUrl: `${BASE_URL}/runs/00000000-0000-0000-0000-000000000000/stream`,
    },
  },
  exampleRequest: {
    method: 'POST',
    url: `${BASE_URL}/runs`,
    body: { workflow: WF_ID, inputs: { url: 'https://example.com', tone: 'neutral' }, idempotencyKey: 'k-1', note: 'other keys allowed' },
  },
};

const sampleListRow = {
  id: RUN_ID,
  status: 'running',
  workflowId: WF_ID,
  workflowVersionId: VERSION_ID,
  startedAt: '2026-11-22T10:00:01Z',
  completedAt: null,
  displayedChargeUsd: null,
  billingStatus: 'pending',
  outcome: null,
  metadata: {},
  deadline: '2026-11-22T10:05:00Z',
};

const sampleAccepted = {
  id: RUN_ID,
  status: 'accepted',
  statusUrl: `${BASE_URL}/runs/${RUN_ID}`,
  eventsUrl: `${BASE_URL}/runs/${RUN_ID}/events`,
  streamUrl: `${BASE_URL}/runs/${RUN_ID}/stream`,
};

const sampleInputsError = {
  error: {
    code: 'invalid_inputs',
    message: '2 inputs are invalid',
    details: [
      { input: 'url', message: 'this input is required' },
      { input: 'colour', message: 'unknown input' },
    ],
  },
};

test('document header: 3.1, version 1.0.0, a relative /v1 server, global bearer auth', () => {
  assert.match(String(doc.openapi), /^3\.1\./);
  assert.is(doc.info.version, '1.0.0');
  // Relative in the file (resolved against wherever it is served); the served copy names the absolute URL.
  assert.equal(doc.servers, [{ url: '/v1', description: doc.servers[0].description }]);
  assert.equal(doc.components.securitySchemes.bearerAuth, { ...doc.components.securitySchemes.bearerAuth, type: 'http', scheme: 'bearer' });
  assert.equal(doc.security, [{ bearerAuth: [] }]);
});

test('every expected operationId exists exactly once, with its scopes and security', () => {
  const ops = operations();
  const ids = ops.map((o) => o.op.operationId);
  assert.equal([...ids].sort(), [...OPERATION_IDS].sort());
  for (const { path, method, op } of ops) {
    assert.ok(Array.isArray(op['x-scopes']), `${method} ${path} has x-scopes`);
    assert.equal(op['x-scopes'], EXPECTED_SCOPES[op.operationId], `x-scopes of ${op.operationId}`);
    if (op.operationId === 'getOpenApiDocument') assert.equal(op.security, [], 'openapi.json is public');
    else assert.is(op.security, undefined, `${op.operationId} inherits global bearer auth`);
  }
  const byId = Object.fromEntries(ops.map((o) => [o.op.operationId, `${o.method.toUpperCase()} ${o.path}`]));
  assert.equal(byId, {
    listWorkflows: 'GET /workflows',
    getWorkflow: 'GET /workflows/{id}',
    listWorkflowVersions: 'GET /workflows/{id}/versions',
    acceptWorkflowUpdate: 'POST /workflows/{id}/accept-update',
    startRun: 'POST /runs',
    startRuns: 'POST /runs/batch',
    listRuns: 'GET /runs',
    getRun: 'GET /runs/{id}',
    cancelRun: 'POST /runs/{id}/cancel',
    rescheduleRun: 'POST /runs/{id}/reschedule',
    cancelRuns: 'POST /runs/cancel',
    replayRun: 'POST /runs/{id}/replay',
    replayRuns: 'POST /runs/replay',
    listRunEvents: 'GET /runs/{run_id}/events',
    streamRun: 'GET /runs/{id}/stream',
    getOpenApiDocument: 'GET /openapi.json',
  });
});

test('every webhook is an operation with its own operationId and its own payload schema', () => {
  const hooks = Object.entries(doc.webhooks as Json).map(([name, item]) => ({ name, op: (item as Json).post }));
  assert.equal(
    hooks.map((h) => [h.name, h.op.operationId, h.op.requestBody.content['application/json'].schema.$ref]),
    [
      ['run.completed', 'runCompletedWebhook', '#/components/schemas/RunCompletedWebhookPayload'],
      ['run.failed', 'runFailedWebhook', '#/components/schemas/RunFailedWebhookPayload'],
      ['run.cancelled', 'runCancelledWebhook', '#/components/schemas/RunCancelledWebhookPayload'],
    ],
  );
  const ids = [...operations().map((o) => o.op.operationId), ...hooks.map((h) => h.op.operationId)];
  assert.is(new Set(ids).size, ids.length, 'operationIds are unique across paths and webhooks');
  // File inputs are typed: the input value schema names WorkflowMedia.
  assert.ok(JSON.stringify(doc.components.schemas.InputValue).includes('#/components/schemas/WorkflowMedia'));
  assert.ok(JSON.stringify(doc.components.schemas.StartRunFields.properties.inputs).includes('#/components/schemas/InputValue'));
});

test('every response of every operation declares X-Request-Id; errors use the Error envelope', () => {
  for (const { path, method, op } of operations()) {
    const statuses = Object.keys(op.responses);
    assert.ok(statuses.length > 1, `${method} ${path} documents errors`);
    assert.ok(statuses.includes('405') && statuses.includes('500'), `${method} ${path} has 405 and 500`);
    if (op.operationId !== 'getOpenApiDocument') assert.ok(statuses.includes('401') && statuses.includes('403'), `${method} ${path} has 401/403`);
    for (const [status, ref] of Object.entries(op.responses as Json)) {
      const res = resolve(ref);
      const header = resolve(res.headers?.['X-Request-Id']);
      assert.ok(header?.schema, `${method} ${path} ${status} declares X-Request-Id`);
      if (Number(status) >= 400) {
        const schema = resolve(res.content?.['application/json']?.schema);
        assert.ok(schema, `${method} ${path} ${status} has a JSON body`);
        const refs = JSON.stringify(schema);
        assert.ok(refs.includes('#/components/schemas/Error'), `${method} ${path} ${status} uses the Error envelope`);
      }
    }
  }
  const start = doc.paths['/runs'].post.responses;
  assert.equal(Object.keys(start['202'].headers).sort(), [
    'Idempotent-Replayed',
    'Location',
    'Preference-Applied',
    'RateLimit-Limit',
    'RateLimit-Remaining',
    'RateLimit-Reset',
    'X-Request-Id',
  ]);
  // Prefer: wait=N (docs/design/prefer-wait.md): the finished run, as GET /runs/{id} returns it.
  assert.is(start['200'].content['application/json'].schema.$ref, '#/components/schemas/Run');
  // Either the finished run (with the wait applied) or the run a debounced call joined (docs/design/flow-control.md).
  assert.ok(start['200'].headers['Preference-Applied'] && start['200'].headers.Debounced, 'a 200 says which of its two cases it is');
  for (const s of ['400', '401', '402', '403', '404', '405', '409', '413', '429', '500']) assert.ok(start[s], `startRun documents ${s}`);
  assert.ok(resolve(start['429']).headers['Retry-After'], '429 carries Retry-After');
  assert.ok(resolve(doc.components.responses.MethodNotAllowed).headers.Allow, '405 carries Allow');
  const stream = doc.paths['/runs/{id}/stream'].get.responses['200'];
  // Each event, as Schemathesis and OpenAPI 3.2's itemSchema read an event stream's schema.
  assert.equal(stream.content['text/event-stream'].schema.required, ['event', 'data']);
  assert.match(stream.description, /event: snapshot/);
  assert.match(stream.description, /: heartbeat/);
});

test('parameters declare their real rule as their schema: integers with ranges, enumerations, UUIDs', () => {
  for (const { path, method, op } of operations()) {
    for (const ref of op.parameters ?? []) {
      const p = resolve(ref);
      assert.ok(p.description, `${method} ${path} ${p.name} description`);
      assert.is(p['x-constraint'], undefined, `${method} ${path} ${p.name}: the rule is the schema`);
      ajv.compile(p.schema); // must be a valid schema, formats known
      if (p.in === 'path') assert.equal(p.schema, { type: 'string', format: 'uuid' }, `${method} ${path} ${p.name}`);
    }
  }
  const schemaOf = (name: string) => resolve({ $ref: `#/components/parameters/${name}` }).schema;
  assert.equal(schemaOf('Limit'), { type: 'integer', minimum: 1, maximum: 50, default: 20 });
  assert.equal(schemaOf('Offset'), { type: 'integer', minimum: 0, maximum: 9007199254740991, default: 0 });
  const param = (opPath: string, m: string, name: string) => doc.paths[opPath][m].parameters.map(resolve).find((p: Json) => p.name === name);
  assert.equal(param('/runs/{run_id}/events', 'get', 'afterSequence').schema, { type: 'integer', minimum: 0, maximum: 9007199254740991, default: 0 });
  assert.equal(param('/runs/{id}/stream', 'get', 'afterSequence').schema, { type: 'integer', minimum: 0, maximum: 9007199254740991 });
  assert.equal(param('/runs/{id}/stream', 'get', 'Last-Event-ID').schema, { type: 'integer', minimum: 0, maximum: 9007199254740991 });
  // Cancel-After's pattern is the service's whole rule (src/domain/run-deadline.ts): the same text, and the same answers.
  const cancelAfter = new RegExp(param('/runs', 'post', 'Cancel-After').schema.pattern);
  assert.is(cancelAfter.source, new RegExp(CANCEL_AFTER_PATTERN).source);
  for (const unit of ['s', 'm', 'h', 'd', '']) {
    for (let n = 0; n <= 90_000; n += n < 2_000 ? 1 : 97) {
      for (const text of [`${n}${unit}`, `0${n}${unit}`]) {
        let taken = true;
        try {
          cancelAfterSeconds(text);
        } catch {
          taken = false;
        }
        assert.is(cancelAfter.test(text), taken, text);
      }
    }
  }
  const names = (opPath: string, m: string) => doc.paths[opPath][m].parameters.map((r: Json) => resolve(r).name);
  assert.equal(names('/workflows', 'get'), ['offset', 'limit', 'q', 'runModel', 'access']);
  assert.equal(names('/runs', 'get'), ['offset', 'limit', 'status', 'workflow', 'metadata', 'concurrencyKey', 'createdAfter', 'createdBefore']);
  assert.equal(names('/runs/{run_id}/events', 'get'), ['run_id', 'afterSequence']);
  assert.equal(names('/runs/{id}/stream', 'get'), ['id', 'afterSequence', 'Last-Event-ID']);
});

test('every components.schemas entry compiles under JSON Schema 2020-12 with known formats', () => {
  const names = Object.keys(doc.components.schemas);
  for (const expected of [
    'Pagination',
    'WorkflowListItem',
    'WorkflowDetail',
    'WorkflowInputField',
    'WorkflowMedia',
    'Run',
    'RunQueue',
    'RunOutputField',
    'RunListItem',
    'AcceptedRun',
    'CancelRunResponse',
    'RunEvent',
    'RunEventsPage',
    'WorkflowVersionsPage',
    'AcceptUpdateResponse',
    'Error',
    'RunModel',
    'UserAccess',
    'CredentialMode',
    'RequiredProvider',
    'PublicRunStatus',
    'RunListStatus',
    'BillingStatus',
    'RunOutcome',
    'WorkflowInputType',
  ]) {
    assert.ok(names.includes(expected), `schema ${expected} exists`);
  }
  for (const name of names) {
    try {
      validator(name);
    } catch (err) {
      assert.unreachable(`${name} does not compile: ${(err as Error).message}`);
    }
  }
});

test('the error code enum covers every code, and each status narrows to its own codes', () => {
  const codes: string[] = doc.components.schemas.ErrorCode.enum;
  for (const c of [
    'unauthorized',
    'insufficient_scope',
    'forbidden',
    'not_found',
    'method_not_allowed',
    'idempotency_conflict',
    'spend_cap_reached',
    'rate_limited',
    'invalid_json',
    'missing_workflow',
    'invalid_inputs',
    'invalid_request',
    'invalid_cursor',
    'internal_error',
    'account_restricted',
    'creator_listings_paused',
    'integration_connection_required',
    'output_too_large',
    'cancel_unavailable',
    'payload_too_large',
    'unsupported_media_type',
  ]) {
    assert.ok(codes.includes(c), `ErrorCode has ${c}`);
  }
  ok('ForbiddenError', { error: { code: 'account_restricted', message: 'restricted' } });
  bad('ForbiddenError', { error: { code: 'not_found', message: 'x' } }, 'a 404 code in a 403 envelope');
  ok('ConflictError', { error: { code: 'cancel_unavailable', message: 'settling' } });
  bad('Error', { error: { code: 'teapot', message: 'x' } }, 'unknown code');
});

test('realistic samples validate', () => {
  ok('Run', sampleRun);
  ok('Run', {
    ...sampleRun,
    status: 'pending',
    outcome: null,
    startedAt: null,
    completedAt: null,
    displayedChargeUsd: null,
    billingStatus: 'pending',
    queue: { state: 'waiting', position: 2, etaSeconds: null },
    outputs: [],
  });
  ok('Run', {
    ...sampleRun,
    status: 'suspended',
    suspended: true,
    outcome: null,
    completedAt: null,
    billingStatus: 'pending',
    displayedChargeUsd: null,
    outputs: [],
  });
  ok('Run', {
    ...sampleRun,
    status: 'failed',
    reason: 'The model provider was unavailable.',
    outcome: null,
    billingStatus: 'not_charged',
    displayedChargeUsd: null,
  });
  ok('WorkflowDetail', sampleDetail);
  const detailOnly = new Set([
    'apiAccessAllowed',
    'purchaseUrl',
    'versionId',
    'versionLabel',
    'pinnedVersionId',
    'activeVersionId',
    'updateAvailable',
    'inputCount',
    'inputSchema',
    'responseShape',
    'exampleRequest',
  ]);
  const item = Object.fromEntries(Object.entries(sampleDetail).filter(([k]) => !detailOnly.has(k)));
  ok('WorkflowListItem', { ...item, runsCount: 12 });
  ok('WorkflowListPage', { workflows: [{ ...item, runsCount: null }], pagination: { offset: 0, limit: 20, hasMore: false } });
  ok('RunListItem', sampleListRow);
  ok('RunListPage', {
    runs: [sampleListRow, { ...sampleListRow, status: 'completed', outcome: 'completed', billingStatus: 'settled', displayedChargeUsd: 0 }],
    pagination: { offset: 20, limit: 20, hasMore: true },
  });
  ok('AcceptedRun', sampleAccepted);
  ok('StartRunResponse', { run: sampleAccepted });
  ok('Error', sampleInputsError);
  ok('BadRequestError', sampleInputsError);
  ok('Error', {
    error: {
      code: 'integration_connection_required',
      message: 'connect GitHub first',
      details: [{ provider: 'GitHub', providerId: 'github', makesChanges: true, connectUrl: 'http://localhost:8080/connections/github' }],
    },
  });
  ok('Error', { error: { code: 'not_found', message: 'run not found' } });
  ok('CancelRunResponse', { id: RUN_ID, status: 'completed', cancelRequested: false });
  ok('RunEventsPage', {
    id: RUN_ID,
    hasMore: true,
    events: [
      { type: 'run.queued', sequence: 1, ts: '2026-11-22T10:00:00.950Z', nodeId: null, data: { status: 'pending' } },
      { type: 'node.output.delta', sequence: 2, ts: '2026-11-22T10:00:02.001Z', nodeId: 'summary', data: { text: 'Hel' } },
      { type: 'node.skipped', sequence: 3, ts: '2026-11-22T10:00:02.101Z', nodeId: 'branch', data: { reason: 'condition_false' } },
      { type: 'some.future.kind', sequence: 4, ts: '2026-11-22T10:00:02.201Z', nodeId: null, data: {} },
    ],
  });
  ok('WorkflowVersionsPage', {
    workflowId: WF_ID,
    activeVersionId: VERSION_ID,
    pinnedVersionId: null,
    versions: [{ id: VERSION_ID, label: 'v2', createdAt: '2026-11-01T00:00:00Z', isActive: true, isPinned: false, inputCount: 2 }],
    pagination: { offset: 0, limit: 20, hasMore: false },
  });
  ok('AcceptUpdateResponse', {
    workflowId: WF_ID,
    previousVersionId: VERSION_ID,
    pinnedVersionId: VERSION_ID,
    activeVersionId: VERSION_ID,
    updateAvailable: false,
  });
  ok('StartRunRequest', { workflowId: WF_ID, inputs: {}, version: VERSION_ID, idempotencyKey: 'abc', extra: 1 });
  ok('WorkflowMedia', { __workflowMedia: true, kind: 'image', url: 'https://cdn.example.com/a.png', mimeType: 'image/png', filename: 'a.png' });
  ok('WorkflowMedia', { __workflowMedia: true, kind: 'document', base64: 'aGVsbG8=', mimeType: 'application/pdf', filename: 'a.pdf' });
  ok('RunWebhookPayload', { type: 'run.completed', timestamp: '2026-11-22T10:00:05Z', data: sampleRun });
  ok('RunCompletedWebhookPayload', { type: 'run.completed', timestamp: '2026-11-22T10:00:05Z', data: sampleRun });
  ok('RunFailedWebhookPayload', {
    type: 'run.failed',
    timestamp: '2026-11-22T10:00:05Z',
    data: { ...sampleRun, status: 'failed', reason: 'boom', outcome: null },
  });
  ok('StartRunRequest', {
    workflow: WF_ID,
    inputs: {
      text: 'hi',
      n: 3,
      flag: true,
      nothing: null,
      list: [1],
      obj: { a: 1 },
      doc: { __workflowMedia: true, kind: 'document', base64: 'aGVsbG8=', mimeType: 'application/pdf', filename: 'a.pdf' },
    },
  });
});

test('near misses are rejected', () => {
  bad('AcceptedRun', { ...sampleAccepted, createdAt: '2026-11-22T10:00:00Z' }, 'extra key on AcceptedRun');
  bad('AcceptedRun', { ...sampleAccepted, status: 'pending' }, 'status other than accepted');
  bad('RunEvent', { type: 'run.started', sequence: 2, ts: '2026-11-22T10:00:01Z', nodeId: null, data: { status: 'running', secret: 'x' } }, 'unknown data key');
  bad('RunEvent', { type: 'run.started', sequence: 2, ts: '2026-11-22T10:00:01Z', nodeId: null, data: { status: 3 } }, 'non-string data value');
  const { suspended: _s, ...noSuspended } = sampleRun;
  bad('Run', noSuspended, 'Run missing suspended');
  const { outputs: _o, ...noOutputs } = sampleRun;
  bad('Run', noOutputs, 'Run missing outputs (always present)');
  bad('Run', { ...sampleRun, status: 'suspended' }, 'suspended flag must match the status');
  bad('Run', { ...sampleRun, status: 'running' }, 'outcome only when completed');
  bad('Run', { ...sampleRun, reason: 'boom' }, 'reason only when failed');
  bad('Run', { ...sampleRun, displayedChargeUsd: '0.25' }, 'amounts are JSON numbers');
  bad('RunListItem', { ...sampleListRow, status: 'suspended' }, 'suspended is reported as running in lists');
  bad('RunListItem', { ...sampleListRow, outputs: [] }, 'list rows omit outputs');
  bad('Run', { ...sampleRun, metadata: { n: 1 } }, 'metadata values are strings');
  bad('Run', { ...sampleRun, metadata: { ['k'.repeat(65)]: 'v' } }, 'metadata keys are at most 64 characters');
  bad('Run', { ...sampleRun, metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v'])) }, 'at most 16 metadata keys');
  bad('StartRunRequest', { workflow: WF_ID, metadata: { k: 'v'.repeat(513) } }, 'metadata values are at most 512 characters');
  bad('WorkflowDetail', { ...sampleDetail, runsCount: 3 }, 'detail has no runsCount');
  const { exampleRequest: _e, ...noExample } = sampleDetail;
  bad('WorkflowDetail', noExample, 'detail fields are all required');
  bad('WorkflowInputField', { nodeId: 'a', name: 'A', type: 'text', options: [{ label: 'x', value: 'x' }] }, 'options only on dropdowns');
  bad('Error', { error: { code: 'invalid_request', message: 'x', details: [{ input: 'a', message: 'b' }] } }, 'details only for two codes');
  bad(
    'Error',
    {
      error: {
        code: 'invalid_inputs',
        message: 'x',
        details: [{ provider: 'GitHub', providerId: 'github', makesChanges: false, connectUrl: 'https://x.test/c' }],
      },
    },
    'input details only',
  );
  bad('Error', { error: { code: 'internal_error' } }, 'message is required');
  bad('Pagination', { offset: 0, limit: 51, hasMore: false }, 'limit over 50');
  bad('StartRunRequest', { inputs: {} }, 'no workflow');
  bad('StartRunRequest', { workflow: 'not-a-uuid' }, 'workflow not a UUID');
  bad('RunCompletedWebhookPayload', { type: 'run.failed', timestamp: '2026-11-22T10:00:05Z', data: sampleRun }, 'another webhook type');
  bad('StartRunRequest', { workflow: WF_ID, idempotencyKey: 'x'.repeat(256) }, 'idempotency key over 255');
  bad('StartRunRequest', { workflow: WF_ID, idempotencyKey: ' \t\u3000\ufeff' }, 'idempotency key blank once trimmed');
  bad('StartRunRequest', { workflow: WF_ID, metadata: null }, 'metadata null');
  bad('StartRunRequest', { workflow: WF_ID, idempotencyKey: null }, 'idempotency key null');
  ok('StartRunRequest', { workflow: WF_ID, idempotencyKey: `${'😀'.repeat(253)} x` });
  bad(
    'WorkflowMedia',
    { __workflowMedia: true, kind: 'image', url: 'https://a.test/x.png', base64: 'aGk=', mimeType: 'image/png', filename: 'x.png' },
    'url and base64 both',
  );
  bad('WorkflowMedia', { __workflowMedia: true, kind: 'image', url: 'http://a.test/x.png', mimeType: 'image/png', filename: 'x.png' }, 'plain http');
  bad('RunEventsPage', { id: RUN_ID, events: [] }, 'hasMore is required');
});

test('every example embedded in the document matches its schema', () => {
  let checked = 0;
  const visit = (node: any, where: string): void => {
    if (!node || typeof node !== 'object') return;
    if (node.schema && (node.example !== undefined || node.examples) && where.includes('/content/')) {
      const schemaRef = node.schema.$ref as string | undefined;
      const v = schemaRef ? ajv.compile({ $ref: `${BASE}${schemaRef}` }) : ajv.compile(node.schema);
      const values = node.example !== undefined ? [node.example] : Object.values(node.examples as Json).map((e: Json) => e.value);
      for (const value of values) {
        assert.ok(v(value), `example at ${where}: ${ajv.errorsText(v.errors)}`);
        checked++;
      }
    }
    for (const [k, child] of Object.entries(node)) visit(child, `${where}/${k}`);
  };
  visit(doc.paths, '#/paths');
  visit(doc.components.responses, '#/components/responses');
  assert.ok(checked >= 20, `checked ${checked} examples`);
});

test('openapi-backend loads the 3.1 document and routes relative to apiRoot, not servers[].url', async () => {
  const definition = structuredClone(doc);
  const api = new OpenAPIBackend({ definition: definition as any, quick: true, validate: false });
  await api.init();
  const match = (method: string, path: string) => api.matchOperation({ method, path, headers: {} })?.operationId;
  // openapi-backend ignores servers[].url: with the default apiRoot '/' the document's paths match as
  // written (without /v1), and the /v1-prefixed public URL does not match.
  assert.is(match('get', '/runs/abc'), 'getRun');
  assert.is(match('get', '/v1/runs/abc'), undefined);
  assert.is(match('get', '/workflows'), 'listWorkflows');
  assert.is(match('get', `/workflows/${WF_ID}`), 'getWorkflow');
  assert.is(match('get', `/workflows/${WF_ID}/versions`), 'listWorkflowVersions');
  assert.is(match('post', `/workflows/${WF_ID}/accept-update`), 'acceptWorkflowUpdate');
  assert.is(match('post', '/runs'), 'startRun');
  assert.is(match('get', '/runs'), 'listRuns');
  assert.is(match('post', `/runs/${RUN_ID}/cancel`), 'cancelRun');
  assert.is(match('post', `/runs/${RUN_ID}/reschedule`), 'rescheduleRun');
  assert.is(match('get', `/runs/${RUN_ID}/events?afterSequence=3`), 'listRunEvents');
  assert.is(match('get', `/runs/${RUN_ID}/stream`), 'streamRun');
  assert.is(match('get', '/openapi.json'), 'getOpenApiDocument');
  assert.is(match('delete', `/runs/${RUN_ID}`), undefined);

  // Mounted under /v1, the public URLs match once apiRoot says so.
  const v1 = new OpenAPIBackend({ definition: structuredClone(doc) as any, quick: true, validate: false, apiRoot: '/v1' });
  await v1.init();
  assert.is(v1.matchOperation({ method: 'get', path: '/v1/runs/abc', headers: {} })?.operationId, 'getRun');
  assert.is(v1.matchOperation({ method: 'get', path: '/v1/openapi.json', headers: {} })?.operationId, 'getOpenApiDocument');
  assert.is(v1.matchOperation({ method: 'get', path: '/runs/abc', headers: {} })?.operationId, undefined);
});

test('request JSON states what Postgres can store: no NUL in any string or key, at any depth', () => {
  for (const value of ['a😀b', [['x', 1], { k: [null, true] }], { nested: { list: ['é', 2.5] } }]) ok('JsonValue', value);
  for (const value of ['a\u0000', ['\u0000'], [[['ok', 'x\u0000']]], { 'k\u0000': 1 }, { k: [{ deep: 'x\u0000' }] }]) {
    bad('JsonValue', value, `unstorable ${JSON.stringify(value)}`);
    bad('InputValue', value, `unstorable input ${JSON.stringify(value)}`);
  }
  bad('StartRunRequest', { workflow: '00000000-0000-4000-8000-00000000f001', idempotencyKey: 'k\u0000' }, 'NUL in the body idempotencyKey');
  bad('StartRunRequest', { workflow: '00000000-0000-4000-8000-00000000f001', inputs: { 'n\u0000': 'x' } }, 'NUL in an input name');
  bad('ReplayRunsRequest', { ids: ['x'], inputs: { 'n\u0000': 'x' } }, 'NUL in an input name of a replay');
  bad('StartRunRequest', { workflow: '00000000-0000-4000-8000-00000000f001', metadata: { k: '\u0000' } }, 'NUL in metadata');
  const media = { __workflowMedia: true, kind: 'document', base64: 'aGk=', mimeType: 'text/plain' };
  ok('WorkflowMedia', { ...media, filename: 'a.txt' });
  bad('WorkflowMedia', { ...media, filename: 'a\u0000.txt' }, 'NUL in a filename');
});

test('every operation documents 408 (a request not received in time) and 431 (URL or headers too large)', () => {
  for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, any>>)) {
    for (const method of METHODS) {
      const op = item[method];
      if (op) for (const status of ['408', '431']) assert.ok(op.responses[status], `${method.toUpperCase()} ${path} documents ${status}`);
    }
  }
});

test.run();
