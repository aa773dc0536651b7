import { writeSync } from 'node:fs';
import { createInterface } from 'node:readline';
import pino from 'pino';
import { parseCatalog } from '../../src/catalog/parse-catalog.ts';
import { loadCatalog } from '../../src/catalog/load-catalog.ts';
import { loadConfig } from '../../src/config/config.ts';
import { migrate, openOrm } from '../../src/db/orm.ts';
import { json } from '../../src/db/sql.ts';
import { interceptStatements } from '../../src/db/statement-connection.ts';
import { EmbeddedEngine } from '../../src/engine/embedded/embedded-engine.ts';
import { loadOrCreateKey, Sealer } from '../../src/security/crypto.ts';
import { authenticateKey } from '../../src/services/auth/authenticate-key.ts';
import { InProcessRunEventBus } from '../../src/services/events/bus.ts';
import { startRun } from '../../src/runs/start-run.ts';

/**
 * A separate process for the kill -9 durability tests (test/engine/embedded-engine.test.ts,
 * test/hardening/faults.test.ts).
 *
 *   start <dataDir> <catalogJson> <workflowId> <nodeId>   loads the catalog, starts the engine and a run,
 *                                                         prints `RUN <id>` once <nodeId> has started, then
 *                                                         keeps working until it is killed
 *   settle <dataDir> <catalogJson> <apiKey>=<workflowId>...
 *                                                         loads the catalog and prints `READY`; on a line on
 *                                                         stdin starts one run per pair (engine not yet
 *                                                         running), prints `RUN <id>` for each, then starts
 *                                                         the engine and keeps working until it is killed.
 *                                                         With KILL_AFTER_SQL (a regex) it kills itself
 *                                                         (SIGKILL) right after the first statement matching
 *                                                         it has executed, inside its open transaction, and
 *                                                         prints `KILLING <sql>` first
 *   finish <dataDir> <runId>...                           prints `BEFORE <json>` (the runs as the restart
 *                                                         finds them: status, billing, ledger rows), starts an
 *                                                         engine on the same database and prints `DONE <json>`
 *                                                         (run row and events) per run once all have ended
 *
 * The database is DATABASE_URL when set, else embedded PGlite persisted in <dataDir>.
 */

const [mode, dataDir, ...rest] = process.argv.slice(2);
const orm = await openOrm(process.env.DATABASE_URL ? { databaseUrl: process.env.DATABASE_URL } : { dataDir: dataDir! });
await migrate(orm);
const sealer = new Sealer(loadOrCreateKey(undefined, dataDir!));
const config = loadConfig({ CATALOG_FILE: 'none', LOG_LEVEL: 'silent', ALLOW_PRIVATE_NETWORK: '1', DATA_DIR: dataDir! });
const base = { config, orm, log: pino({ level: 'silent' }), sealer, bus: new InProcessRunEventBus(), baseUrl: () => 'http://localhost/v1' };
const engine = new EmbeddedEngine(base, { leaseTtlMs: 1_000, sweepIntervalMs: 200 });
const deps = { ...base, engine };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const TERMINAL = ['completed', 'failed', 'cancelled'];

/** Synchronous, so a line written right before a self-inflicted SIGKILL is not lost in a pipe buffer. */
const say = (line: string) => writeSync(1, `${line}\n`);

async function runRow(runId: string) {
  const [row] = await orm.em.fork().execute<Record<string, unknown>[]>('select status, charge_usd, outputs, steps_executed from runs where id = ?', [runId]);
  return row;
}

async function done(runId: string) {
  const row = (await runRow(runId))!;
  const events = await orm.em
    .fork()
    .execute<Record<string, unknown>[]>('select type, sequence, node_id, data from run_events where run_id = ? order by sequence', [runId]);
  return {
    run: {
      ...row,
      outputs: json(row.outputs),
      charge_usd: row.charge_usd === null ? null : String(row.charge_usd),
      steps_executed: Number(row.steps_executed),
    },
    events: events.map((e) => ({ type: e.type, sequence: Number(e.sequence), nodeId: e.node_id ?? null, data: json(e.data) })),
  };
}

if (mode === 'start') {
  const [catalogJson, workflowId, nodeId] = rest;
  await loadCatalog(orm, parseCatalog(catalogJson!, 'crash-test'), { sealer });
  await engine.start();
  const principal = await authenticateKey(deps, 'Bearer wr_alice_key');
  const { run } = await startRun(deps, principal, { body: { workflow: workflowId } });
  for (;;) {
    const rows = await orm.em.fork().execute(`select 1 from run_events where run_id = ? and type = 'node.started' and node_id = ?`, [run.id, nodeId]);
    if (rows.length) break;
    await sleep(10);
  }
  process.stdout.write(`RUN ${run.id}\n`);
  await sleep(60_000); // killed long before
} else if (mode === 'settle') {
  const [catalogJson, ...pairs] = rest;
  await loadCatalog(orm, parseCatalog(catalogJson!, 'settle-test'), { sealer });
  const killAfter = process.env.KILL_AFTER_SQL ? new RegExp(process.env.KILL_AFTER_SQL, 'i') : null;
  const killBefore = process.env.KILL_BEFORE_SQL ? new RegExp(process.env.KILL_BEFORE_SQL, 'i') : null;
  if (killAfter || killBefore) {
    // Every statement passes the connection's interceptor (em.execute, the ORM's own and src/sql
    // statements alike; transactions included).
    interceptStatements(orm, async (sql, send, params) => {
      if (killBefore?.test(sql.trim())) {
        say(`KILLING ${JSON.stringify({ sql: sql.trim(), params })}`);
        process.kill(process.pid, 'SIGKILL');
        await sleep(60_000);
      }
      const result = await send();
      if (killAfter?.test(sql.trim())) {
        say(`KILLING ${JSON.stringify({ sql: sql.trim(), params })}`);
        process.kill(process.pid, 'SIGKILL');
        await sleep(60_000);
      }
      return result;
    });
  }
  say('READY');
  await new Promise<void>((resolve) => createInterface({ input: process.stdin }).once('line', () => resolve()));
  const ids: string[] = [];
  for (const pair of pairs) {
    const [key, workflowId] = pair.split('=');
    const principal = await authenticateKey(deps, `Bearer ${key}`);
    const { run } = await startRun(deps, principal, { body: { workflow: workflowId } });
    ids.push(run.id);
  }
  for (const id of ids) say(`RUN ${id}`);
  await engine.start();
  await sleep(60_000); // killed long before
} else if (mode === 'finish') {
  const runIds = rest;
  const before = [];
  for (const id of runIds) {
    const ledger = await orm.em.fork().execute<Record<string, unknown>[]>('select kind, amount_usd from ledger_entries where run_id = ? order by id', [id]);
    const row = await orm.em.fork().execute<Record<string, unknown>[]>('select status, billing_status, charge_usd from runs where id = ?', [id]);
    before.push({
      id,
      ...row[0],
      charge_usd: row[0]?.charge_usd == null ? null : String(row[0].charge_usd),
      ledger: ledger.map((l) => ({ kind: l.kind, amount: String(l.amount_usd) })),
    });
  }
  say(`BEFORE ${JSON.stringify(before)}`);
  await engine.start();
  for (;;) {
    const rows = await Promise.all(runIds.map(runRow));
    if (rows.every((row) => row && TERMINAL.includes(String(row.status)))) {
      const out = [];
      for (const id of runIds) out.push(await done(id));
      await engine.stop();
      for (const o of out) say(`DONE ${JSON.stringify(o)}`);
      await orm.close(true);
      process.exit(0);
    }
    await sleep(20);
  }
}
