import { randomUUID } from 'node:crypto';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { BOB_SECRET, PRIVATE_TOOL, errorCodes, startHarness, type Harness } from './helpers/harness.ts';

/** The internal graph's cancelRuns and replayRuns: the REST services by filter (docs/design/runs-in-sets.md). */

let h: Harness;
test.before(async () => {
  h = await startHarness();
});
test.after(async () => {
  await h?.close();
});

const CANCEL = `mutation($accountId: ID!, $filter: JSON!, $dryRun: Boolean) {
  cancelRuns(accountId: $accountId, filter: $filter, dryRun: $dryRun) { dryRun matched cancelled alreadyTerminal nextCursor } }`;
const REPLAY = `mutation($apiKeyId: ID!, $filter: JSON!) {
  replayRuns(apiKeyId: $apiKeyId, filter: $filter) { items { index runId errorCode } accepted refused nextCursor } }`;

test("cancelRuns by metadata filter: a dry run counts, then the account's matching runs are cancelled", async () => {
  const tag = randomUUID();
  const ids = [
    await h.startRun(BOB_SECRET, PRIVATE_TOOL, { name: 'a' }, { metadata: { tag } }),
    await h.startRun(BOB_SECRET, PRIVATE_TOOL, { name: 'b' }, { metadata: { tag } }),
  ];
  const [run] = await h.em().execute('select account_id, api_key_id from runs where id = ?', [ids[0]]);
  const accountId = String(run.account_id);
  const dry = await h.gql<{ cancelRuns: Record<string, unknown> }>(CANCEL, { accountId, filter: { metadata: { tag } }, dryRun: true });
  assert.equal(dry.body.data!.cancelRuns, { dryRun: true, matched: 2, cancelled: 2, alreadyTerminal: 0, nextCursor: null });
  const done = await h.gql<{ cancelRuns: Record<string, unknown> }>(CANCEL, { accountId, filter: { metadata: { tag } } });
  assert.equal(done.body.data!.cancelRuns, { dryRun: false, matched: 2, cancelled: 2, alreadyTerminal: 0, nextCursor: null });
  const statuses = await h.em().execute<{ status: string }[]>(`select status from runs where metadata->>'tag' = ?`, [tag]);
  assert.equal(
    statuses.map((s) => s.status),
    ['cancelled', 'cancelled'],
  );
  assert.equal(errorCodes(await h.gql(CANCEL, { accountId, filter: {} })), ['BAD_USER_INPUT'], 'an empty filter is refused');

  const replay = await h.gql<{ replayRuns: { items: { runId: string | null }[]; accepted: number; refused: number } }>(REPLAY, {
    apiKeyId: String(run.api_key_id),
    filter: { metadata: { tag } },
  });
  assert.is(replay.status, 200, replay.text);
  assert.equal([replay.body.data!.replayRuns.accepted, replay.body.data!.replayRuns.refused], [2, 0]);
  const replayOf = await h.em().execute('select replay_of from runs where id = ?', [replay.body.data!.replayRuns.items[0]!.runId]);
  assert.ok(ids.includes(String(replayOf[0].replay_of)));
});

test.run();
