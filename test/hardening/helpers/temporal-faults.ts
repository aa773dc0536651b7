import type { ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as assert from 'uvu/assert';
import type { Orm } from '../../../src/db/orm.ts';
import { assertRunLog, micros, sleep, spawnTsx, waitFor, type EventRow } from './faults.ts';

/**
 * Shared by test/hardening/temporal-faults.test.ts: Temporal worker processes (`src/worker.ts`, as an
 * operator runs them), a slow local HTTP endpoint for steps that are in flight when a fault lands, and
 * the checks every fault ends with (a run completed once, its log sound, charged once).
 */

export interface WorkerProcess {
  child: ChildProcess;
  name: string;
  /** The last 20 kB it printed (stdout and stderr), for failure messages. */
  output(): string;
  alive(): boolean;
  exited: Promise<void>;
  /** SIGKILL (a crash); resolves when the process is gone. */
  kill(): Promise<void>;
  /** SIGTERM (a graceful shutdown); resolves with the exit code once it is gone, null after `ms`. */
  terminate(ms: number): Promise<number | null>;
}

/** `node --import tsx src/worker.ts` with `env` on top of this process's environment. */
export function startWorker(name: string, env: Record<string, string>): WorkerProcess {
  const { child, output, exit, alive } = spawnTsx('src/worker.ts', { LOG_LEVEL: 'warn', CATALOG_FILE: 'none', ENGINE: 'temporal', ...env });
  return {
    child,
    name,
    output: () => output().slice(-20_000),
    alive,
    exited: exit,
    async kill() {
      if (alive()) child.kill('SIGKILL');
      await Promise.race([exit, sleep(10_000)]);
    },
    async terminate(ms) {
      if (alive()) child.kill('SIGTERM');
      await Promise.race([exit, sleep(ms)]);
      return alive() ? null : child.exitCode;
    },
  };
}

export interface SlowEndpoint {
  url: string;
  /** Requests received so far (a request cut by a killed worker counts). */
  hits(): number;
  /** Requests received but not answered yet. */
  open(): number;
  close(): Promise<void>;
}

/** Answers every GET with `body` after `holdMs`: a step that is surely in flight while a fault lands. */
export async function slowEndpoint(holdMs: number, body: string): Promise<SlowEndpoint> {
  let hits = 0;
  let open = 0;
  const server: Server = createServer((_req, res) => {
    hits++;
    open++;
    const timer = setTimeout(() => res.writeHead(200, { 'content-type': 'text/plain' }).end(body), holdMs);
    res.once('close', () => {
      open--;
      clearTimeout(timer);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/slow`,
    hits: () => hits,
    open: () => open,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

type Rows = Record<string, any>[];

/** The run rows of `runIds` with their statuses, as the test polls them. */
export async function runStatuses(orm: Orm, runIds: string[]): Promise<Map<string, string>> {
  const rows = await orm.em.fork().execute<Rows>('select id, status from runs where id in (?)', [runIds]);
  return new Map(rows.map((r) => [String(r.id), String(r.status)]));
}

/** Waits until every run is terminal; the message names the runs that are not, with `why()` appended. */
export async function waitTerminal(orm: Orm, runIds: string[], ms: number, why: () => string): Promise<void> {
  let last = new Map<string, string>();
  await waitFor(
    `${runIds.length} run(s) to end`,
    async () => {
      last = await runStatuses(orm, runIds);
      return runIds.every((id) => ['completed', 'failed', 'cancelled'].includes(last.get(id) ?? ''));
    },
    ms,
    250,
  ).catch((err) => {
    const open = runIds.filter((id) => !['completed', 'failed', 'cancelled'].includes(last.get(id) ?? ''));
    throw new Error(
      `${(err as Error).message}; not ended: ${open
        .slice(0, 10)
        .map((id) => `${id} (${last.get(id)})`)
        .join(', ')}${why()}`,
    );
  });
}

/** Waits for `node.started` of `nodeId` in the run's log. */
export async function waitNodeStarted(orm: Orm, runId: string, nodeId: string, ms: number, why: () => string): Promise<void> {
  await waitFor(
    `node.started of ${nodeId} in run ${runId}`,
    async () =>
      (await orm.em.fork().execute<Rows>(`select 1 from run_events where run_id = ? and type = 'node.started' and node_id = ?`, [runId, nodeId])).length > 0,
    ms,
    50,
  ).catch((err) => {
    throw new Error(`${(err as Error).message}${why()}`);
  });
}

/**
 * The run completed once and was charged once: completed and settled, its charge exactly `charge`
 * (micro-dollars) with `steps` steps counted, a sound log (sequences 1..n, one terminal event, each
 * node started / completed once), the ledger one hold (`hold`, the price and the steps; the charge when
 * omitted), its release and one charge, `output` as its single output value.
 */
export async function assertCompletedOnce(
  orm: Orm,
  runId: string,
  expected: { charge: number; hold?: number; steps: number; nodes: { started: string[]; completed: string[] }; output: string },
): Promise<void> {
  const em = orm.em.fork();
  const [r] = await em.execute<Rows>('select status, outcome, billing_status, charge_usd, cap_usd, steps_executed, outputs from runs where id = ?', [runId]);
  assert.ok(r, `run ${runId} is missing`);
  assert.equal([r!.status, r!.outcome, r!.billing_status], ['completed', 'completed', 'settled'], `run ${runId}`);
  assert.is(micros(r!.charge_usd), expected.charge, `run ${runId}: charge`);
  assert.is(micros(r!.cap_usd), expected.charge, `run ${runId}: the spend-cap reservation is not the charge`);
  assert.is(Number(r!.steps_executed), expected.steps, `run ${runId}: steps counted`);
  const outputs = (typeof r!.outputs === 'string' ? JSON.parse(r!.outputs) : r!.outputs) as { value: unknown }[];
  assert.equal(
    outputs.map((o) => o.value),
    [expected.output],
    `run ${runId}: outputs`,
  );
  const events = (await em.execute<Rows>('select sequence, type, node_id from run_events where run_id = ? order by sequence', [runId])).map(
    (e): EventRow => ({ sequence: Number(e.sequence), type: String(e.type), nodeId: (e.node_id as string | null) ?? null }),
  );
  assertRunLog(runId, events, 'run.completed', expected.nodes);
  const ledger = await em.execute<Rows>('select kind, amount_usd from ledger_entries where run_id = ? order by id', [runId]);
  assert.equal(
    ledger.map((l) => [l.kind, micros(l.amount_usd)]),
    [
      ['hold', -(expected.hold ?? expected.charge)],
      ['release', expected.hold ?? expected.charge],
      ['charge', -expected.charge],
    ],
    `run ${runId}: ledger rows`,
  );
}

/** The account's wallet: `balance` left (micro-dollars), nothing held. */
export async function assertWallet(orm: Orm, accountId: string, balance: number): Promise<void> {
  const [w] = await orm.em.fork().execute<Rows>('select balance_usd, held_usd from wallets where account_id = ?', [accountId]);
  assert.is(micros(w!.balance_usd), balance, 'wallet balance');
  assert.is(micros(w!.held_usd), 0, 'the wallet still holds money');
}
