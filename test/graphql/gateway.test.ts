import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { startGateway } from '../../docs/examples/federation-gateway.ts';
import { GREETER, TOKEN, startHarness, type Harness } from './helpers/harness.ts';

/** docs/examples/federation-gateway.ts: an @apollo/gateway composes this subgraph and answers through it. */

let h: Harness;
let gateway: { url: string; stop: () => Promise<void> } | undefined;

test.before(async () => {
  h = await startHarness();
});

test.after(async () => {
  await gateway?.stop();
  await h?.close();
});

async function query<T>(
  url: string,
  q: string,
  variables?: Record<string, unknown>,
): Promise<{ status: number; body: { data?: T; errors?: { message: string }[] } }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query: q, variables }) });
  return { status: res.status, body: (await res.json()) as { data?: T; errors?: { message: string }[] } };
}

test('an Apollo gateway composes the subgraph and answers queries through it with the internal token', async () => {
  gateway = await startGateway({ subgraphUrl: `${h.url}/graphql`, internalToken: TOKEN, port: 0 });
  const res = await query<{ workflow: { id: string; name: string; owner: { handle: string } } }>(
    gateway.url,
    'query($id: ID!) { workflow(id: $id) { id name owner { handle } } }',
    { id: GREETER },
  );
  assert.is(res.status, 200, JSON.stringify(res.body));
  assert.is(res.body.errors, undefined, JSON.stringify(res.body.errors));
  assert.equal(res.body.data!.workflow, { id: GREETER, name: 'Greeter', owner: { handle: 'alice' } });
  // The gateway's composed schema hides the federation plumbing the subgraph exposes.
  const plumbing = await query(gateway.url, '{ _service { sdl } }');
  assert.ok(plumbing.body.errors?.length, 'the supergraph does not expose _service');
});

test('without the internal token the gateway cannot compose the subgraph', async () => {
  const refused = startGateway({ subgraphUrl: `${h.url}/graphql`, internalToken: 'not-the-internal-token-000', port: 0 });
  await refused.then(
    (g) => g.stop().then(() => assert.unreachable('the gateway started')),
    (err: Error) => assert.ok(err instanceof Error),
  );
});

test.run();
