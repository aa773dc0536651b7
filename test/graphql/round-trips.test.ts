import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { statementsWhile } from '../helpers/statement-log.ts';
import { ALICE_SECRET, BOB_SECRET, GREETER, PRIVATE_TOOL, startHarness, type Harness } from './helpers/harness.ts';

/**
 * A page of runs with their relations reads each relation once for the whole page (DataLoaders over the
 * request's EntityManager, src/graphql/loaders.ts), however many runs it holds.
 */

let h: Harness;

test.before(async () => {
  h = await startHarness();
  for (let i = 0; i < 10; i++) await h.startRun(ALICE_SECRET, GREETER, { name: `a${i}`, place: 'here' });
  for (let i = 0; i < 40; i++) await h.startRun(BOB_SECRET, PRIVATE_TOOL, { name: `b${i}` });
});

test.after(async () => {
  await h?.close();
});

const PAGE = `{ runs(limit: 50) { runs {
  id status accountHandle createdAt
  workflow { id name ownerId priceUsd listing runsCount activeVersionId }
  account { id handle restricted connections }
} pagination { hasMore } } }`;

/** The background loops of the app (webhook outbox, idempotency sweep) run whatever the request does. */
const background = (sql: string) => /webhook_deliveries|idempotency_records/.test(sql);

test('50 runs with their workflow and account go to Postgres in at most 3 statements', async () => {
  type Page = { runs: { runs: { accountHandle: string; workflow: { id: string; runsCount: number }; account: { handle: string } }[] } };
  const { result, sql } = await statementsWhile(
    h.app.deps.orm,
    () => h.gql<Page>(PAGE),
    (s) => !background(s.query),
  );
  assert.is(result.status, 200, result.text);
  const runs = result.body.data!.runs.runs;
  assert.is(runs.length, 50);
  assert.equal(new Set(runs.map((r) => r.account.handle)), new Set(['alice', 'bob']));
  assert.ok(runs.every((r) => r.accountHandle === r.account.handle));
  assert.equal(new Set(runs.map((r) => r.workflow.id)), new Set([GREETER, PRIVATE_TOOL]));
  assert.ok(sql.length <= 3, `${sql.length} statements:\n${sql.join('\n')}`);
  assert.ok(sql.length >= 1, 'the request was seen');
});

test.run();
