import { GraphQLError } from 'graphql';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { formatGraphQLError } from '../../src/graphql/errors.ts';
import { MAX_TOKENS } from '../../src/graphql/limits.ts';
import { TOKEN, errorCodes, startHarness, type Harness } from './helpers/harness.ts';

/**
 * A query too large or too deeply nested to parse is refused as a parse failure (HTTP 400,
 * GRAPHQL_PARSE_FAILED, a message naming the limit) on both endpoints, never as an internal error.
 */

let h: Harness;

test.before(async () => {
  h = await startHarness();
});

test.after(async () => {
  await h?.close();
});

const nestedSelections = (levels: number) => `{ runs ${'{ runs '.repeat(levels)}{ id }${' }'.repeat(levels)} }`;
const nestedLists = (levels: number) => `{ runs(status: ${'['.repeat(levels)}${']'.repeat(levels)}) { pagination { hasMore } } }`;

/** POST /graphql/stream as an SSE client sends it: a refusal is a JSON body, an accepted operation an event stream. */
async function overStream(query: string): Promise<{ status: number; text: string; codes: unknown[]; message?: string }> {
  const res = await fetch(`${h.url}/graphql/stream`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: 'text/event-stream', Authorization: `Bearer ${TOKEN}` },
    body: JSON.stringify({ query }),
  });
  const text = await res.text();
  if (!res.headers.get('content-type')?.includes('json')) return { status: res.status, text, codes: [] };
  const errors = (JSON.parse(text) as { errors?: { message: string; extensions?: Record<string, unknown> }[] }).errors ?? [];
  return { status: res.status, text, codes: errors.map((e) => e.extensions?.code), message: errors[0]?.message };
}

test('a query nested 2,000 levels deep is a parse failure (400 GRAPHQL_PARSE_FAILED), on POST /graphql and on the stream', async () => {
  for (const query of [nestedSelections(2_000), nestedLists(2_000), nestedSelections(20_000)]) {
    const res = await h.gql(query);
    assert.is(res.status, 400, res.text.slice(0, 300));
    assert.equal(errorCodes(res), ['GRAPHQL_PARSE_FAILED']);
    assert.match(res.body.errors![0]!.message, `${MAX_TOKENS} tokens. Parsing aborted`, res.text.slice(0, 300));
    assert.is(res.body.data, undefined);

    const streamed = await overStream(query);
    assert.is(streamed.status, 400, streamed.text.slice(0, 300));
    assert.equal(streamed.codes, ['GRAPHQL_PARSE_FAILED']);
    assert.match(streamed.message!, `${MAX_TOKENS} tokens. Parsing aborted`, streamed.text.slice(0, 300));
  }
});

test('a valid query just within the token limit is parsed and then refused by the depth limit', async () => {
  // Nine tokens a cycle (`{ owner { purchases { workflow` and its three `}`), twelve for the rest with one
  // `id`; more `id`s fill the query up to the limit exactly.
  const cycles = Math.floor((MAX_TOKENS - 12) / 9);
  const nested = (ids: number) =>
    `{ runs { runs { workflow ${'{ owner { purchases { workflow '.repeat(cycles)}{ ${'id '.repeat(ids)}}${' }'.repeat(3 * cycles)} } } }`;
  const query = nested(1 + MAX_TOKENS - 12 - 9 * cycles);
  const res = await h.gql(query);
  assert.is(res.status, 400, res.text.slice(0, 300));
  assert.equal(errorCodes(res), ['QUERY_TOO_DEEP']);
  const streamed = await overStream(query);
  assert.is(streamed.status, 200, streamed.text.slice(0, 300));
  assert.match(streamed.text, '"code":"QUERY_TOO_DEEP"');
  assert.equal(errorCodes(await h.gql(nested(2 + MAX_TOKENS - 12 - 9 * cycles))), ['GRAPHQL_PARSE_FAILED'], 'one more token is over the limit');
});

test('a parser that runs out of stack within the token limit is still a parse failure, not an internal error', () => {
  // What Apollo hands formatError when parse() throws something other than a syntax error.
  const overflow = new GraphQLError('Maximum call stack size exceeded', {
    extensions: { code: 'GRAPHQL_PARSE_FAILED' },
    originalError: new RangeError('Maximum call stack size exceeded'),
  });
  const formatted = formatGraphQLError(overflow.toJSON(), overflow, h.app.deps.log);
  assert.equal(formatted, { message: 'the query could not be parsed: it is nested too deeply', extensions: { code: 'GRAPHQL_PARSE_FAILED' } });
});

test("a plain syntax error is GRAPHQL_PARSE_FAILED on both endpoints, with the parser's message", async () => {
  const res = await h.gql('{ runs { ');
  assert.is(res.status, 400);
  assert.equal(errorCodes(res), ['GRAPHQL_PARSE_FAILED']);
  assert.match(res.body.errors![0]!.message, 'Syntax Error');
  const streamed = await overStream('{ runs { ');
  assert.is(streamed.status, 400);
  assert.equal(streamed.codes, ['GRAPHQL_PARSE_FAILED']);
  assert.match(streamed.message!, 'Syntax Error');
});

test.run();
