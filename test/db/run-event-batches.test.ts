import { randomUUID } from 'node:crypto';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { AccountSchema, RunSchema, WorkflowSchema, WorkflowVersionSchema } from '../../src/db/entities/index.ts';
import type { Orm } from '../../src/db/orm.ts';
import { query, statement } from '../../src/db/statement.ts';
import { NODE_STREAM_SO_FAR, READ_RUN_EVENTS, runEventsCte } from '../../src/sql/run-events.ts';
import { resetDb, testOrm } from '../helpers/db.ts';

/**
 * The event log's writer and readers (src/sql/run-events.ts, docs/round-trips.md#the-event-log-in-batches):
 * every statement that grows a run's log bumps the run's last_sequence and inserts its events as one
 * batch with runEventsCte, as APPEND does here.
 */

const APPEND = statement(
  'test_append_run_events',
  `with call as (select * from jsonb_to_record($1::jsonb) as call(run_id uuid, types text[], node_ids text[], data jsonb[])),
appended as (update runs set last_sequence = runs.last_sequence + cardinality(call.types) from call where runs.id = call.run_id returning runs.id, runs.last_sequence),
${runEventsCte('appended', 'call')}
select last_sequence from appended`,
);

const t = suite<{ orm: Orm }>('run event batches');
t.before(async (ctx) => {
  ctx.orm = await testOrm();
});
t.before.each(async ({ orm }) => resetDb(orm));

async function newRun(orm: Orm): Promise<string> {
  const em = orm.em.fork();
  const [accountId, workflowId, versionId, runId] = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
  em.create(AccountSchema, { id: accountId, handle: `events-${accountId.slice(0, 8)}` });
  em.create(WorkflowSchema, {
    id: workflowId,
    ownerId: accountId,
    name: 'W',
    runModel: 'free',
    priceUsd: '0',
    listing: 'public',
    credentialMode: 'service_hosted',
    activeVersionId: versionId,
  });
  await em.flush();
  em.create(WorkflowVersionSchema, {
    id: versionId,
    workflowId,
    label: 'v1',
    graph: { nodes: [{ id: 't', kind: 'text.template', template: 'hi' }] },
    graphHash: 'b'.repeat(64),
  });
  await em.flush();
  em.create(RunSchema, {
    id: runId,
    accountId,
    workflowId,
    versionId,
    userAccess: 'owned',
    computeLimitUsd: '5',
    credentialMode: 'service_hosted',
    inputs: {},
    progress: { results: {}, timers: {} },
  });
  await em.flush();
  return runId;
}

const appendCall = (runId: string, types: string[], nodeIds: (string | null)[], data: object[]) => [
  JSON.stringify({ run_id: runId, types, node_ids: nodeIds, data }),
];
const append = (orm: Orm, runId: string, events: [string, string | null, object][]) =>
  query<{ last_sequence: number }>(
    orm.em.fork(),
    APPEND,
    appendCall(
      runId,
      events.map((e) => e[0]),
      events.map((e) => e[1]),
      events.map((e) => e[2]),
    ),
  );

const batches = (orm: Orm, runId: string) =>
  orm.em
    .fork()
    .execute<{ last_sequence: number; types: string[] }[]>('select last_sequence, types from run_event_batches where run_id = ? order by last_sequence', [
      runId,
    ]);

t('each write is one batch numbered after the last, and a write with no events leaves no batch', async ({ orm }) => {
  const runId = await newRun(orm);
  await append(orm, runId, [
    ['run.queued', null, { status: 'pending' }],
    ['run.started', null, { status: 'running' }],
  ]);
  const [none] = await append(orm, runId, []);
  assert.is(Number(none!.last_sequence), 2, 'the run moved on by nothing');
  await append(orm, runId, [['node.started', 't', {}]]);
  assert.equal(await batches(orm, runId), [
    { last_sequence: 2, types: ['run.queued', 'run.started'] },
    { last_sequence: 3, types: ['node.started'] },
  ]);
  const events = await query<{ sequence: number; type: string; node_id: string | null; data: unknown }>(orm.em.fork(), READ_RUN_EVENTS, [runId, 0, 10]);
  assert.equal(
    events.map((e) => [Number(e.sequence), e.type, e.node_id, e.data]),
    [
      [1, 'run.queued', null, { status: 'pending' }],
      [2, 'run.started', null, { status: 'running' }],
      [3, 'node.started', 't', {}],
    ],
  );
});

t('a write whose arrays differ in length is refused whole: no batch, the run unchanged', async ({ orm }) => {
  const runId = await newRun(orm);
  await append(orm, runId, [['run.queued', null, {}]]);
  const error = await query(orm.em.fork(), APPEND, appendCall(runId, ['a', 'b'], [null], [{}, {}])).then(
    () => null,
    (err: Error) => err,
  );
  assert.ok(error, 'arrays of two, one and two events were written');
  assert.match(error.message, /null value in column "types"/);
  assert.equal(await batches(orm, runId), [{ last_sequence: 1, types: ['run.queued'] }]);
  const [run] = await orm.em.fork().execute<{ last_sequence: number }[]>('select last_sequence from runs where id = ?', [runId]);
  assert.is(run!.last_sequence, 1);
});

t('reads start inside a batch and stop inside one: the cursor and the limit count events, not batches', async ({ orm }) => {
  const runId = await newRun(orm);
  await append(orm, runId, [['run.queued', null, {}]]);
  await append(orm, runId, [
    ['node.started', 't', {}],
    ['node.output.delta', 't', { text: 'a' }],
    ['node.output.delta', 't', { text: 'b' }],
    ['node.completed', 't', {}],
  ]);
  await append(orm, runId, [['run.completed', null, { status: 'completed' }]]);
  const read = async (after: number, limit: number) =>
    (await query<{ sequence: number }>(orm.em.fork(), READ_RUN_EVENTS, [runId, after, limit])).map((e) => Number(e.sequence));
  assert.equal(await read(0, 2), [1, 2], 'the limit stops inside the second batch');
  assert.equal(await read(2, 2), [3, 4], 'the cursor starts inside it');
  assert.equal(await read(4, 10), [5, 6], 'the rest of it, then the next batch');
  assert.equal(await read(6, 10), []);
  const sofar = await query<{ type: string; data: { text?: string } }>(orm.em.fork(), NODE_STREAM_SO_FAR, [runId, 't']);
  assert.equal(
    sofar.map((e) => [e.type, e.data.text ?? null]),
    [
      ['node.started', null],
      ['node.output.delta', 'a'],
      ['node.output.delta', 'b'],
    ],
  );
});

t('a process of the previous version, inserting into run_events a row per event, still extends the log', async ({ orm }) => {
  const runId = await newRun(orm);
  await append(orm, runId, [['run.queued', null, {}]]);
  // The previous version's insert (its runEventsCte, with RETURNING), as during a rolling upgrade.
  const returned = await orm.em.fork().execute<{ sequence: number }[]>(
    `with u as (update runs set last_sequence = last_sequence + 2 where id = ? returning id, last_sequence)
     insert into run_events (run_id, sequence, type, node_id, data, ts)
     select u.id, u.last_sequence - 2 + v.ord, v.type, v.node_id, v.data::jsonb, clock_timestamp()
       from u cross join unnest('{node.started,node.completed}'::text[], '{t,t}'::text[], '{"{}","{}"}'::text[]) with ordinality as v(type, node_id, data, ord)
     returning sequence`,
    [runId],
  );
  assert.equal(
    returned.map((r) => r.sequence),
    [2, 3],
  );
  await append(orm, runId, [['run.completed', null, {}]]);
  const events = await query<{ sequence: number; type: string }>(orm.em.fork(), READ_RUN_EVENTS, [runId, 0, 10]);
  assert.equal(
    events.map((e) => [Number(e.sequence), e.type]),
    [
      [1, 'run.queued'],
      [2, 'node.started'],
      [3, 'node.completed'],
      [4, 'run.completed'],
    ],
  );
});

t.run();
