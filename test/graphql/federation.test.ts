import { readFile } from 'node:fs/promises';
import { composeServices } from '@apollo/composition';
import { parse } from 'graphql';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { printSubgraphSdl, SUBGRAPH_SDL_FILE } from '../../src/graphql/print-schema.ts';
import { ALICE_SECRET, GREETER, TOKEN, startHarness, type Harness } from './helpers/harness.ts';

let h: Harness;

test.before(async () => {
  h = await startHarness();
});

test.after(async () => {
  await h?.close();
});

test('schema/subgraph.graphql is exactly the SDL printed from the code (run `npm run schema:print` after a change)', async () => {
  const committed = await readFile(SUBGRAPH_SDL_FILE, 'utf8');
  const printed = await printSubgraphSdl();
  assert.fixture(committed, printed);
});

test('the SDL carries the documented operations exactly: names, arguments and entity keys', async () => {
  const sdl = await readFile(SUBGRAPH_SDL_FILE, 'utf8');
  const flat = sdl.replace(/"""[\s\S]*?"""/g, '').replace(/\s+/g, ' ');
  for (const expected of [
    'run(id: ID!): Run',
    'runs( accountHandle: String status: RunStatus workflowId: ID offset: Int = 0 limit: Int = 20',
    'workflow(id: ID!): Workflow',
    'workflows( offset: Int = 0 limit: Int = 20',
    'account(handle: String!): Account',
    'supplyRunCredentials(runId: ID!, credentials: [ProviderCredentialInput!]!): Run!',
    'cancelRun(id: ID!): Run!',
    'acceptWorkflowUpdate(workflowId: ID!, accountHandle: String!): Workflow!',
    'runEvents( runId: ID! afterSequence: Int ): RunEvent!',
    'input ProviderCredentialInput { provider: String! apiKey: String! }',
    'type RunPage { runs: [Run!]! pagination: Pagination! }',
    'type WorkflowPage { workflows: [Workflow!]! pagination: Pagination! }',
    'type Run @key(fields: "id")',
    'type Workflow @key(fields: "id")',
    'type WorkflowVersion @key(fields: "id")',
    'type Account @key(fields: "id")',
  ]) {
    assert.ok(flat.includes(expected), `missing: ${expected}`);
  }
});

test('_service { sdl } serves the subgraph SDL', async () => {
  const res = await h.gql<{ _service: { sdl: string } }>('{ _service { sdl } }');
  assert.is(res.status, 200, res.text);
  const sdl = res.body.data!._service.sdl;
  assert.match(sdl, '@link(url: "https://specs.apollo.dev/federation/v2.7"');
  for (const type of ['Run', 'Workflow', 'WorkflowVersion', 'Account']) assert.match(sdl, `type ${type} @key(fields: "id")`);
  // What the gateway receives is the committed SDL, followed by the federation definitions it links.
  const file = (await readFile(SUBGRAPH_SDL_FILE, 'utf8')).replace(/^#.*\n/, '');
  assert.ok(sdl.startsWith(file.trim()), 'the served SDL starts with the committed one');
  assert.match(sdl, 'directive @key(fields: federation__FieldSet!');
});

test('_entities resolves Run, Workflow, WorkflowVersion and Account references, null for unknown ids', async () => {
  const runId = await h.startRun(ALICE_SECRET, GREETER, { name: 'x', place: 'y' });
  const account = await h.gql<{ account: { id: string } }>('{ account(handle: "alice") { id } }');
  const wf = await h.gql<{ workflow: { activeVersionId: string } }>(`{ workflow(id: "${GREETER}") { activeVersionId } }`);
  const reps = [
    { __typename: 'Run', id: runId },
    { __typename: 'Workflow', id: GREETER },
    { __typename: 'WorkflowVersion', id: wf.body.data!.workflow.activeVersionId },
    { __typename: 'Account', id: account.body.data!.account.id },
    { __typename: 'Run', id: '00000000-0000-4000-8000-000000000000' },
  ];
  const res = await h.gql<{ _entities: (Record<string, unknown> | null)[] }>(
    `query($r: [_Any!]!) { _entities(representations: $r) {
       __typename
       ... on Run { id status accountHandle events(limit: 1) { type } }
       ... on Workflow { id name }
       ... on WorkflowVersion { id label isActive }
       ... on Account { id handle wallet { balanceUsd } } } }`,
    { r: reps },
  );
  assert.is(res.status, 200, res.text);
  assert.is(res.body.errors, undefined);
  const [run, workflow, version, acct, missing] = res.body.data!._entities;
  assert.equal(run, { __typename: 'Run', id: runId, status: 'PENDING', accountHandle: 'alice', events: [{ type: 'run.queued' }] });
  assert.equal(workflow, { __typename: 'Workflow', id: GREETER, name: 'Greeter' });
  assert.equal(version, { __typename: 'WorkflowVersion', id: wf.body.data!.workflow.activeVersionId, label: 'v2', isActive: true });
  assert.equal(acct, { __typename: 'Account', id: account.body.data!.account.id, handle: 'alice', wallet: { balanceUsd: '10.000000' } });
  assert.is(missing, null);
});

test('the subgraph composes with a second subgraph that extends Run', async () => {
  const sdl = await readFile(SUBGRAPH_SDL_FILE, 'utf8');
  const insights = `
    extend schema @link(url: "https://specs.apollo.dev/federation/v2.7", import: ["@key"])
    type Run @key(fields: "id") {
      id: ID!
      riskScore: Float
    }
    type Query {
      riskiestRuns(limit: Int = 10): [Run!]!
    }`;
  const result = composeServices([
    { name: 'workflow-runs', typeDefs: parse(sdl), url: 'http://runs.internal/graphql' },
    { name: 'run-insights', typeDefs: parse(insights), url: 'http://insights.internal/graphql' },
  ]);
  assert.is(result.errors, undefined, (result.errors ?? []).map((e) => e.message).join('\n'));
  const supergraph = result.supergraphSdl!;
  assert.match(supergraph, /riskScore: Float/);
  assert.match(supergraph, /riskiestRuns/);
  assert.match(supergraph, /runEvents\(/);
  assert.match(supergraph, /@join__type\(graph: RUN_INSIGHTS, key: "id"\)/);
});

test('introspection works outside production mode', async () => {
  const res = await h.gql<{ __schema: { queryType: { name: string } } }>('{ __schema { queryType { name } } }');
  assert.is(res.status, 200);
  assert.equal(res.body.data!.__schema.queryType, { name: 'Query' });
});

test('production mode turns introspection and the landing page off', async () => {
  await h?.close();
  h = await startHarness({ NODE_ENV: 'production' });
  const res = await h.gql('{ __schema { queryType { name } } }');
  assert.is(res.status, 400);
  assert.is(res.body.data, undefined);
  assert.match(res.text, /introspection/i);
  const page = await fetch(`${h.url}/graphql`, { headers: { Accept: 'text/html', Authorization: `Bearer ${TOKEN}` } });
  const html = await page.text();
  assert.not.match(html, /<html|apollo-server-landing-page|embeddable-sandbox/i);
  // Ordinary queries still work.
  const ok = await h.gql<{ account: { handle: string } }>('{ account(handle: "alice") { handle } }');
  assert.equal(ok.body.data, { account: { handle: 'alice' } });
});

test("outside production mode a browser gets the GraphiQL explorer from this server (Apollo's CDN landing page is off)", async () => {
  await h?.close();
  h = await startHarness();
  const page = await fetch(`${h.url}/graphql`, { headers: { Accept: 'text/html', Authorization: `Bearer ${TOKEN}` } });
  assert.is(page.status, 200);
  const html = await page.text();
  assert.match(html, /<!doctype html>[\s\S]*graphiql\.js/i);
  assert.not.match(html, /apollo-server-landing-page|embeddable-sandbox|https?:\/\//i);
});

test.run();
