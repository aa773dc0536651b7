import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { createLogger } from '../../src/logger.ts';
import { statementsWhile } from '../helpers/statement-log.ts';
import { GREETER, TOKEN, errorCodes, startHarness, type Harness } from './helpers/harness.ts';

/**
 * Text Postgres cannot hold (a NUL, an unpaired UTF-16 surrogate) in any string argument is the client's
 * mistake: BAD_USER_INPUT naming the argument, before any statement, on both endpoints, and no
 * error-level log line. So is an `_entities` representation of a type the subgraph does not resolve.
 */

let h: Harness;
const logLines: { level: number; msg: string }[] = [];

test.before(async () => {
  const log = createLogger('info', { write: (line: string) => void logLines.push(JSON.parse(line)) });
  h = await startHarness({}, { log });
});

test.after(async () => {
  await h?.close();
});

test.before.each(() => {
  logLines.length = 0;
});

const PINO_ERROR = 50;
const errorLines = () => logLines.filter((l) => l.level >= PINO_ERROR);

const NUL = 'al\u0000ice';
const LONE_HIGH = 'al\uD800ice';
const LONE_LOW = '\uDC00alice';

/** POST /graphql/stream as an SSE client sends it; the events' payloads, or a refusal's JSON body. */
async function overStream(query: string, variables?: Record<string, unknown>): Promise<{ status: number; text: string }> {
  const res = await fetch(`${h.url}/graphql/stream`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: 'text/event-stream', Authorization: `Bearer ${TOKEN}` },
    body: JSON.stringify({ query, variables }),
  });
  return { status: res.status, text: await res.text() };
}

const cases: { what: string; query: string; argument: string; value?: (bad: string) => Record<string, unknown> }[] = [
  { what: 'account(handle:)', query: 'query($v: String!) { account(handle: $v) { id } }', argument: 'handle' },
  { what: 'runs(accountHandle:)', query: 'query($v: String) { runs(accountHandle: $v) { pagination { hasMore } } }', argument: 'accountHandle' },
  { what: 'workflows(q:)', query: 'query($v: String) { workflows(q: $v) { pagination { hasMore } } }', argument: 'q' },
  { what: 'workflows(ownerHandle:)', query: 'query($v: String) { workflows(ownerHandle: $v) { pagination { hasMore } } }', argument: 'ownerHandle' },
  { what: 'run(id:)', query: 'query($v: ID!) { run(id: $v) { id } }', argument: 'id' },
  {
    what: 'an input object field: supplyRunCredentials(credentials: [{ apiKey }])',
    query:
      'mutation($v: String!) { supplyRunCredentials(runId: "00000000-0000-4000-8000-000000000000", credentials: [{ provider: "openai", apiKey: $v }]) { id } }',
    argument: 'credentials[0].apiKey',
  },
];

for (const c of cases) {
  test(`${c.what}: a NUL or an unpaired surrogate in a variable is BAD_USER_INPUT naming the argument, before any statement`, async () => {
    for (const bad of [NUL, LONE_HIGH, LONE_LOW]) {
      const { result: res, sql } = await statementsWhile(
        h.app.deps.orm,
        () => h.gql(c.query, { v: bad }),
        (s) => (s.params ?? []).some((p) => typeof p === 'string' && p.includes('ice')),
      );
      assert.is(res.status, 400, res.text);
      assert.equal(errorCodes(res), ['BAD_USER_INPUT'], res.text);
      assert.match(res.body.errors![0]!.message, `"${c.argument}"`);
      assert.match(res.body.errors![0]!.message, /NUL|surrogate/);
      assert.is(res.body.data, undefined, res.text);
      assert.equal(sql, [], 'no statement carried the value');
    }
    assert.equal(errorLines(), []);
  });
}

test('a NUL written into the query as a \\u0000 escape is refused the same way', async () => {
  const res = await h.gql('{ account(handle: "al\\u0000ice") { id } }');
  assert.is(res.status, 400, res.text);
  assert.equal(errorCodes(res), ['BAD_USER_INPUT']);
  assert.match(res.body.errors![0]!.message, '"handle"');
  assert.equal(errorLines(), []);
});

test('ordinary text, astral characters included, still reaches the resolvers', async () => {
  const res = await h.gql<{ account: { handle: string } | null; workflows: { workflows: unknown[] } }>(
    'query($h: String!, $q: String) { account(handle: $h) { handle } workflows(q: $q) { workflows { id } } }',
    { h: 'alice', q: 'Greeter 😀' },
  );
  assert.is(res.status, 200, res.text);
  assert.is(res.body.data!.account!.handle, 'alice');
  assert.equal(res.body.data!.workflows.workflows, []);
});

test('/graphql/stream refuses the same argument with the same error', async () => {
  const res = await overStream('query($v: String!) { account(handle: $v) { id } }', { v: NUL });
  assert.match(res.text, '"code":"BAD_USER_INPUT"', res.text);
  assert.match(res.text, '\\"handle\\"', res.text);
  assert.not.match(res.text, '"http"', 'the HTTP status hint stays inside the server');
  assert.not.match(res.text, 'INTERNAL_SERVER_ERROR');
  assert.equal(errorLines(), []);
});

test('_entities: an unknown __typename is BAD_USER_INPUT naming it, not an internal error', async () => {
  const query = 'query($r: [_Any!]!) { _entities(representations: $r) { ... on Workflow { id } } }';
  for (const typename of ['Nope', 'Query', 'RunPage', 'String']) {
    const res = await h.gql(query, {
      r: [
        { __typename: 'Workflow', id: GREETER },
        { __typename: typename, id: GREETER },
      ],
    });
    assert.is(res.status, 400, res.text);
    assert.equal(errorCodes(res), ['BAD_USER_INPUT'], res.text);
    assert.match(res.body.errors![0]!.message, `representations[1]`);
    assert.match(res.body.errors![0]!.message, typename);
  }
  const missing = await h.gql(query, { r: [{ id: GREETER }] });
  assert.equal(errorCodes(missing), ['BAD_USER_INPUT'], missing.text);
  const nul = await h.gql(query, { r: [{ __typename: 'Workflow', id: NUL }] });
  assert.equal(errorCodes(nul), ['BAD_USER_INPUT'], nul.text);
  assert.match(nul.body.errors![0]!.message, 'representations[0].id');
  const ok = await h.gql<{ _entities: { id: string }[] }>(query, { r: [{ __typename: 'Workflow', id: GREETER }] });
  assert.equal(ok.body.data!._entities, [{ id: GREETER }], ok.text);
  assert.equal(errorLines(), []);
});

test.run();
