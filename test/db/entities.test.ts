import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import {
  AccountSchema,
  ApiKeySchema,
  LedgerEntrySchema,
  RunEventBatchSchema,
  RunEventSchema,
  RunSchema,
  WalletSchema,
  WorkflowSchema,
  WorkflowVersionSchema,
} from '../../src/db/entities/index.ts';
import { migrate, MIGRATION_LOCK_KEY, type Orm } from '../../src/db/orm.ts';
import { resetDb, testOrm } from '../helpers/db.ts';

const t = suite<{ orm: Orm }>('entities and migrations');
t.before(async (ctx) => {
  ctx.orm = await testOrm();
  await resetDb(ctx.orm);
});

t('migrations are idempotent and leave no difference between the entities and the schema', async ({ orm }) => {
  assert.equal(await migrate(orm), []);
  assert.is((await orm.schema.getUpdateSchemaSQL()).trim(), '');
});

t('a restart on a migrated server database neither takes nor waits for the migration lock', async ({ orm }) => {
  const url = process.env.DATABASE_URL;
  if (!url) return; // PGlite takes no lock: one process holds its data directory
  const holder = new pg.Client({ connectionString: url });
  await holder.connect();
  try {
    await holder.query('select pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
    const waited = new Promise<'waited'>((resolve) => setTimeout(() => resolve('waited'), 5_000).unref());
    assert.equal(await Promise.race([migrate(orm), waited]), []);
  } finally {
    await holder.end();
  }
});

t('an account, wallet, key, workflow, version, run and event round-trip through the ORM', async ({ orm }) => {
  const em = orm.em.fork();
  const accountId = randomUUID();
  const workflowId = randomUUID();
  const versionId = randomUUID();
  const runId = randomUUID();
  em.create(AccountSchema, { id: accountId, handle: 'round', connections: ['github'] });
  em.create(WalletSchema, { accountId, balanceUsd: '0.123457', heldUsd: '0' });
  em.create(ApiKeySchema, {
    id: randomUUID(),
    accountId,
    keyHash: 'a'.repeat(64),
    prefix: 'wr_',
    scopes: ['run:read'],
    spendCapWindow: 'monthly',
    spendCapUsd: '12.345678',
  });
  em.create(WorkflowSchema, {
    id: workflowId,
    ownerId: accountId,
    name: 'W',
    runModel: 'per_run',
    priceUsd: '0.250000',
    listing: 'public',
    credentialMode: 'byok',
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
    userAccess: 'wallet',
    computeLimitUsd: '5.000000',
    credentialMode: 'byok',
    inputs: { a: 1 },
    progress: { results: { t: { status: 'completed', value: 'hi' } }, timers: {} },
  });
  await em.flush();
  em.create(RunEventBatchSchema, { runId, lastSequence: 1, types: ['run.queued'], nodeIds: [null], data: [{ status: 'pending' }] });
  em.create(LedgerEntrySchema, { accountId, kind: 'credit', amountUsd: '0.123457', balanceAfterUsd: '0.123457' });
  await em.flush();

  const fresh = orm.em.fork();
  const wallet = await fresh.findOneOrFail(WalletSchema, { accountId });
  assert.is(wallet.balanceUsd, '0.123457');
  const key = await fresh.findOneOrFail(ApiKeySchema, { accountId });
  assert.equal(key.scopes, ['run:read']);
  assert.is(key.spendCapUsd, '12.345678');
  const run = await fresh.findOneOrFail(RunSchema, { id: runId });
  assert.is(run.status, 'pending');
  assert.is(run.billingStatus, 'pending');
  assert.equal(run.progress.results.t, { status: 'completed', value: 'hi' });
  assert.equal(run.outputs, [], `outputs is ${typeof run.outputs}: ${JSON.stringify(run.outputs)}`);
  const ev = await fresh.findOneOrFail(RunEventSchema, { runId, sequence: 1 });
  assert.equal(ev.data, { status: 'pending' });
  const account = await fresh.findOneOrFail(AccountSchema, { id: accountId });
  assert.equal(account.connections, ['github']);
});

t('event arrays written through the ORM keep every character: quotes, backslashes, braces, commas, NULL-like text', async ({ orm }) => {
  const em = orm.em.fork();
  const [batch] = await em.execute<{ run_id: string }[]>(`select run_id from run_event_batches limit 1`);
  const runId = String(batch!.run_id);
  const texts = ['a"b', 'back\\slash', '{x,y}', 'NULL', '', ' spaced ', 'é😀', "it's"];
  const data = texts.map((text) => ({ text, nested: { quote: '"', slash: '\\' } }));
  em.create(RunEventBatchSchema, { runId, lastSequence: 100 + texts.length, types: texts, nodeIds: [...texts.slice(1), null], data });
  await em.flush();
  const rows = await orm.em
    .fork()
    .execute<{ types: string[]; node_ids: (string | null)[]; data: unknown[] }[]>(
      `select types, node_ids, data from run_event_batches where run_id = ? and last_sequence = ?`,
      [runId, 100 + texts.length],
    );
  assert.equal(rows[0]!.types, texts);
  assert.equal(rows[0]!.node_ids, [...texts.slice(1), null]);
  assert.equal(rows[0]!.data, data);
  await em.execute(`delete from run_event_batches where run_id = ? and last_sequence = ?`, [runId, 100 + texts.length]);
});

t('six-decimal amounts stay exact in the database: 0.123457 + 0.000100 = 0.123557', async ({ orm }) => {
  const em = orm.em.fork();
  const [row] = await em.execute<{ balance_usd: string }[]>(
    `update wallets set balance_usd = balance_usd + ? where account_id = (select id from accounts where handle = 'round') returning balance_usd`,
    ['0.000100'],
  );
  assert.is(row!.balance_usd, '0.123557');
  const w = await orm.em.fork().findOneOrFail(WalletSchema, { balanceUsd: '0.123557' });
  assert.is(w.balanceUsd, '0.123557');
});

t('a batch of run events is unique per run and last sequence', async ({ orm }) => {
  const em = orm.em.fork();
  const [run] = await em.execute<{ id: string }[]>('select id from runs limit 1');
  const error = await em
    .execute(`insert into run_event_batches (run_id, last_sequence, types, node_ids, data) values (?, 1, '{dup}', '{NULL}', array['{}'::jsonb])`, [run!.id])
    .then(
      () => null,
      (err: Error) => err,
    );
  assert.ok(error, 'a second batch ending at sequence 1 was accepted');
  assert.match(error.message, /duplicate key value violates unique constraint/i);
});

t('the view run_events shows one row per event, numbered through the batches', async ({ orm }) => {
  const em = orm.em.fork();
  const [run] = await em.execute<{ id: string }[]>('select id from runs limit 1');
  await em.execute(
    `insert into run_event_batches (run_id, last_sequence, types, node_ids, data) values (?, 4, '{node.started,node.output.delta,node.completed}', '{t,t,t}', array['{}', '{"text":"hi"}', '{}']::jsonb[])`,
    [run!.id],
  );
  const rows = await em.execute<{ sequence: number; type: string; node_id: string | null; data: unknown }[]>(
    'select sequence, type, node_id, data from run_events where run_id = ? order by sequence',
    [run!.id],
  );
  assert.equal(rows, [
    { sequence: 1, type: 'run.queued', node_id: null, data: { status: 'pending' } },
    { sequence: 2, type: 'node.started', node_id: 't', data: {} },
    { sequence: 3, type: 'node.output.delta', node_id: 't', data: { text: 'hi' } },
    { sequence: 4, type: 'node.completed', node_id: 't', data: {} },
  ]);
});

t("a run's enumerated columns refuse other values through their types, with no table CHECK to compile per statement", async ({ orm }) => {
  const em = orm.em.fork();
  const [run] = await em.execute<{ id: string }[]>('select id from runs limit 1');
  for (const [column, value] of [
    ['status', 'done'],
    ['outcome', 'ok'],
    ['billing_status', 'paid'],
    ['user_access', 'free'],
    ['credential_mode', 'mine'],
  ] as const) {
    const error = await em.execute(`update runs set ${column} = ? where id = ?`, [value, run!.id]).then(
      () => null,
      (err: Error) => err,
    );
    assert.ok(error, `${column} = '${value}' was accepted`);
    assert.match(error.message, new RegExp(`^value for domain runs_${column} violates check constraint "runs_${column}_check"$`));
    assert.is((error as Error & { code?: string }).code, '23514', 'a check violation, as the table CHECK raised');
  }
  const checks = await em.execute<{ n: number }[]>(`select count(*)::int as n from pg_constraint where conrelid = 'runs'::regclass and contype = 'c'`);
  assert.is(checks[0]!.n, 0);
  const [ok] = await em.execute<{ status: string }[]>(`update runs set status = 'cancelled', outcome = null where id = ? returning status`, [run!.id]);
  assert.is(ok!.status, 'cancelled');
});

t('the lookups the API does are indexed', async ({ orm }) => {
  const rows = await orm.em.fork().execute<{ indexdef: string }[]>(`select indexdef from pg_indexes where schemaname = 'public'`);
  const defs = rows.map((r) => r.indexdef).join('\n');
  for (const expected of [
    /runs_account_created_idx ON public\.runs USING btree \(account_id, created_at, id\)/,
    /run_event_batches_pkey ON public\.run_event_batches USING btree \(run_id, last_sequence\)/,
    /idempotency_account_key_unique ON public\.idempotency_records USING btree \(account_id, key\)/,
    /api_keys_key_hash_unique ON public\.api_keys USING btree \(key_hash\)/,
    /webhook_deliveries_due_idx/,
  ]) {
    assert.match(defs, expected);
  }
});

t.run();
