import pino from 'pino';
import { loadCatalog, parseCatalog } from '../../src/catalog/load-catalog.ts';
import { loadConfig } from '../../src/config/config.ts';
import { migrate, openOrm } from '../../src/db/orm.ts';
import { json } from '../../src/db/sql.ts';
import { EmbeddedEngine } from '../../src/engine/embedded/embedded-engine.ts';
import { loadOrCreateKey, Sealer } from '../../src/security/crypto.ts';
import { authenticateKey } from '../../src/services/auth/authenticate-key.ts';
import { InProcessRunEventBus } from '../../src/services/events/bus.ts';
import { startRun } from '../../src/services/runs/start-run.ts';

/**
 * A separate process for the kill -9 durability test (test/engine/embedded-engine.test.ts).
 *
 *   start <dataDir> <catalogJson> <workflowId> <nodeId>   loads the catalog, starts the engine and a run,
 *                                                         prints `RUN <id>` once <nodeId> has started, then
 *                                                         keeps working until it is killed
 *   finish <dataDir> <runId>                              starts an engine on the same database and prints
 *                                                         `DONE <json>` (run row and events) once the run ended
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
} else if (mode === 'finish') {
  const [runId] = rest;
  await engine.start();
  for (;;) {
    const [row] = await orm.em.fork().execute<Record<string, unknown>[]>('select status, charge_usd, outputs, steps_executed from runs where id = ?', [runId]);
    if (row && ['completed', 'failed', 'cancelled'].includes(String(row.status))) {
      const events = await orm.em.fork().execute<Record<string, unknown>[]>(
        'select type, sequence, node_id, data from run_events where run_id = ? order by sequence',
        [runId],
      );
      await engine.stop();
      const out = {
        run: { ...row, outputs: json(row.outputs), charge_usd: row.charge_usd === null ? null : String(row.charge_usd), steps_executed: Number(row.steps_executed) },
        events: events.map((e) => ({ type: e.type, sequence: Number(e.sequence), nodeId: e.node_id ?? null, data: json(e.data) })),
      };
      process.stdout.write(`DONE ${JSON.stringify(out)}\n`);
      await orm.close(true);
      process.exit(0);
    }
    await sleep(20);
  }
}
