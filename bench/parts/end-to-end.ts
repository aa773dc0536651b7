import { randomBytes } from 'node:crypto';
import { closedLoop, hammer, httpJson, terminalWaiter } from '../load.ts';
import { closeChild, countKinds, loadStep, measured, profiled, rate, ratio, startChild, vsFloor } from '../measure.ts';
import { facts, notes, rows } from '../results.ts';
import { ACCOUNTS, CAPACITY, DATABASE_URL, DURATION, E2E_RUNS_PER_SEC, E2E_TARGET, HEADERS, log, ONLY, USERS, WARMUP } from '../settings.ts';
import { BENCH_KEY, summarise, WORKFLOW_1, WORKFLOW_3 } from '../shared.ts';
import { batchesEndToEnd } from './batch.ts';

// Part 2 of `npm run bench` (bench/run.ts): end to end (and 3a. polling a completed run).

export async function endToEnd(): Promise<void> {
  log(`end-to-end: starting the app (embedded engine, RUN_CAPACITY=${CAPACITY})`);
  const accountKeys = Array.from({ length: ACCOUNTS }, (_, i) => `wr_bench_account_${i + 1}_${randomBytes(12).toString('hex')}`);
  const child = await startChild('embedded', { accounts: accountKeys, track: true });
  const app = `${child.ready.appUrl}/v1/runs`;
  const floor = `${child.ready.floorUrl}/runs`;
  const workflows = `${child.ready.appUrl}/v1/workflows`;
  const waiter = terminalWaiter();
  child.onTerminal = (runs) => waiter.done(runs);
  const submit = (wf: string) => () => httpJson('POST', app, { key: BENCH_KEY, body: { workflow: wf, inputs: { name: 'Ada' } } });
  let turn = 0;
  const submitSpread = () => httpJson('POST', app, { key: accountKeys[turn++ % accountKeys.length]!, body: { workflow: WORKFLOW_3, inputs: { name: 'Ada' } } });
  const runOnce = async (wf: string) => {
    const r = await submit(wf)();
    if (r.status !== 202) throw new Error(`POST /runs answered ${r.status}: ${JSON.stringify(r.body)}`);
    const id = String(r.body.run.id);
    const status = await waiter.wait(id, 15_000);
    if (status !== 'completed') {
      const [row] = await child.sql<{ status: string; reason: string | null }>('select status, reason from runs where id = ?', [id]);
      throw new Error(`run ${id} did not complete: ${status} (database: ${row?.status}${row?.reason ? `, ${row.reason}` : ''})`);
    }
    return { id, status };
  };
  /** Accept → completed of these runs from the database clock (created_at → completed_at), 2000 ids a query. */
  const completionMs = async (ids: string[]) => {
    const ms: number[] = [];
    for (let i = 0; i < ids.length; i += 2000) {
      const part = await child.sql<{ ms: number }>(`select (extract(epoch from completed_at - created_at) * 1000)::float8 as ms from runs where id in (?)`, [
        ids.slice(i, i + 2000),
      ]);
      ms.push(...part.map((r) => Number(r.ms)));
    }
    return ms;
  };

  if (ONLY.has('e2e')) {
    try {
      await e2eSteps();
    } catch (err) {
      notes.push(`End-to-end NOT MEASURED: ${err instanceof Error ? err.message : String(err)}`);
      rows.push({
        group: 'End to end',
        name: '3-step runs, 202 → terminal',
        clients: String(USERS),
        value: 'not measured',
        baseline: '—',
        ratio: '—',
        target: E2E_TARGET,
        verdict: 'MISS',
      });
    }
  }
  async function e2eSteps(): Promise<void> {
    // Single runs, one at a time: the per-step overhead.
    for (let i = 0; i < 3; i++) await runOnce(WORKFLOW_3);
    const one: string[] = [];
    const three: string[] = [];
    for (let i = 0; i < 20; i++) {
      one.push((await runOnce(WORKFLOW_1)).id);
      three.push((await runOnce(WORKFLOW_3)).id);
    }
    const l1 = summarise(await completionMs(one));
    const l3 = summarise(await completionMs(three));
    const events = await child.sql<{ run_id: string; type: string; node_id: string | null; t: number }>(
      `select run_id, type, node_id, (extract(epoch from ts) * 1000)::float8 as t from run_events where run_id in (?) order by run_id, sequence`,
      [three],
    );
    const byRun = new Map<string, { type: string; node: string | null; t: number }[]>();
    for (const e of events) {
      const list = byRun.get(String(e.run_id)) ?? [];
      list.push({ type: String(e.type), node: e.node_id, t: Number(e.t) });
      byRun.set(String(e.run_id), list);
    }
    const phase = { admit: [] as number[], step: [] as number[], finish: [] as number[], first: [] as number[] };
    for (const list of byRun.values()) {
      const at = (type: string, node: string | null = null) => list.find((e) => e.type === type && (node === null || e.node === node))?.t ?? NaN;
      phase.admit.push(at('run.started') - at('run.queued'));
      phase.first.push(at('node.completed', 't1') - at('run.started'));
      phase.step.push((at('node.completed', 't3') - at('node.completed', 't1')) / 2);
      phase.finish.push(at('run.completed') - at('node.completed', 't3'));
    }
    const perStep = (l3.p50 - l1.p50) / 2;
    const gap = summarise(phase.step).p50;
    facts.perStep = gap;
    facts.single3 = l3.p50;
    rows.push({
      group: 'End to end',
      name: 'single 3-step run, accept → completed (sequential)',
      clients: '1',
      value: `${l3.p50.toFixed(1)} ms`,
      p50: l3.p50,
      p99: l3.p99,
      baseline: `1-step run ${l1.p50.toFixed(1)} ms`,
      baseP50: l1.p50,
      baseP99: l1.p99,
      ratio: '—',
      target: '—',
      verdict: '',
    });
    rows.push({
      group: 'End to end',
      name: 'per-step overhead, ms per text.template node (single runs, event timestamps)',
      clients: '1',
      value: `${gap.toFixed(2)} ms`,
      baseline: facts.floorP50_1 ? `one floor POST /runs transaction ${facts.floorP50_1.toFixed(2)} ms` : '—',
      ratio: '—',
      target: '—',
      verdict: '',
    });
    notes.push(
      `Per-step overhead: node.completed(t1) → node.completed(t3) / 2 in ${three.length} sequential 3-step runs (p50) = ${gap.toFixed(2)} ms; ` +
        `(p50 of the 3-step run − p50 of the 1-step run) / 2 = ${perStep.toFixed(2)} ms (noisier). Phases of a single 3-step run (p50): queued → started ${summarise(phase.admit).p50.toFixed(1)} ms, started → first step done ` +
        `${summarise(phase.first).p50.toFixed(1)} ms, step → next step ${gap.toFixed(2)} ms, last step → run.completed ${summarise(phase.finish).p50.toFixed(1)} ms.`,
    );

    // Closed loop at RUN_CAPACITY clients.
    if (WARMUP > 0) await closedLoop({ users: USERS, seconds: WARMUP, submit: submit(WORKFLOW_3), waiter });
    // As in hotStep: statistics as autovacuum keeps them on a live database. Without this, a statement
    // whose generic plan was made while runs held a few rows keeps that plan (a sequential scan of runs)
    // for the whole step, which no live database with autovacuum would.
    await child.sql('analyze');
    const e2e = await measured(child, `end-to-end ×${USERS}`, async () => {
      const r = await closedLoop({ users: USERS, seconds: DURATION, submit: submit(WORKFLOW_3), waiter });
      return { ...r, ops: r.runIds.length };
    });
    const s = summarise(await completionMs(e2e.runIds));
    const client = summarise(e2e.clientMs);
    const post = summarise(e2e.postMs);
    const runsPerSec = e2e.runIds.length / e2e.seconds;
    facts.e2e = runsPerSec;
    facts.e2eSqlPerRun = e2e.step.server.sql.statements / Math.max(1, e2e.runIds.length);
    const failed = Object.entries(e2e.statuses).filter(([k]) => k !== 'completed');
    if (failed.length || e2e.rejected) notes.push(`End-to-end: statuses ${JSON.stringify(e2e.statuses)}, ${e2e.rejected} submissions refused.`);
    log(`end-to-end: ${runsPerSec.toFixed(0)} runs/s, p50 ${s.p50.toFixed(1)} ms, p99 ${s.p99.toFixed(1)} ms`);
    rows.push({
      group: 'End to end',
      name: `3-step runs, 202 → terminal (closed loop, RUN_CAPACITY=${CAPACITY})`,
      clients: String(USERS),
      value: rate(runsPerSec, 'runs/s'),
      p50: s.p50,
      p99: s.p99,
      baseline: facts.floor32 ? `floor POST /runs ×32 ${rate(facts.floor32)}` : '—',
      ratio: facts.floor32 ? ratio(runsPerSec, facts.floor32) : '—',
      target: DATABASE_URL ? `${E2E_TARGET} (Postgres server)` : `(${E2E_TARGET} applies to a Postgres server)`,
      verdict: DATABASE_URL ? (runsPerSec >= E2E_RUNS_PER_SEC ? 'met' : 'MISS') : '',
    });
    notes.push(
      `End-to-end latency is accept → completed from the database clock (runs.created_at → completed_at); seen by the client ` +
        `(202 received → terminal reported, includes the harness's terminal detection, about 1 ms): p50 ${client.p50.toFixed(1)} ms, p99 ${client.p99.toFixed(1)} ms. ` +
        `POST /runs itself during this load: p50 ${post.p50.toFixed(1)} ms, p99 ${post.p99.toFixed(1)} ms.`,
    );

    if (ONLY.has('batch')) await batchesEndToEnd(child, app, waiter, runsPerSec);

    // The same spread over several accounts: no wallet row shared by every run.
    const spread = await measured(child, `end-to-end ×${USERS}, ${ACCOUNTS} accounts`, async () => {
      const r = await closedLoop({ users: USERS, seconds: DURATION, submit: submitSpread, waiter });
      return { ...r, ops: r.runIds.length };
    });
    const ss = summarise(await completionMs(spread.runIds));
    const spreadRate = spread.runIds.length / spread.seconds;
    facts.e2eSpread = spreadRate;
    log(`end-to-end over ${ACCOUNTS} accounts: ${spreadRate.toFixed(0)} runs/s, p50 ${ss.p50.toFixed(1)} ms, p99 ${ss.p99.toFixed(1)} ms`);
    rows.push({
      group: 'End to end',
      name: `the same, runs spread over ${ACCOUNTS} accounts (no shared wallet row)`,
      clients: String(USERS),
      value: rate(spreadRate, 'runs/s'),
      p50: ss.p50,
      p99: ss.p99,
      baseline: `one account ${rate(runsPerSec, 'runs/s')}`,
      ratio: ratio(spreadRate, runsPerSec),
      target: '(informative)',
      verdict: '',
    });
    if (Object.keys(spread.statuses).some((k) => k !== 'completed') || spread.rejected) {
      notes.push(`End-to-end over ${ACCOUNTS} accounts: statuses ${JSON.stringify(spread.statuses)}, ${spread.rejected} submissions refused.`);
    }

    await countKinds(child, '3-step run, end to end (POST + engine)', 10, () => runOnce(WORKFLOW_3));
    await profiled(child, `end-to-end ×${USERS}`, () => closedLoop({ users: USERS, seconds: Math.min(3, DURATION), submit: submit(WORKFLOW_3), waiter }));
  }

  if (ONLY.has('poll'))
    await pollCompleted().catch((err) => notes.push(`Polling a completed run NOT MEASURED: ${err instanceof Error ? err.message : String(err)}`));
  async function pollCompleted(): Promise<void> {
    const { id } = await runOnce(WORKFLOW_3);
    const a = await loadStep(child, 'GET /runs/{completed} ×32', { url: `${app}/${id}`, connections: 32, seconds: DURATION, headers: HEADERS });
    const f = await loadStep(child, 'floor GET ×32', { url: `${floor}/${id}`, connections: 32, seconds: DURATION });
    facts.poll = a.rps;
    facts.pollFloor = f.rps;
    rows.push(
      vsFloor(a, f, {
        group: 'Polling',
        name: 'GET /runs/{id}, completed run',
        clients: '32',
        target: '≥ 75 % of floor',
        verdict: a.rps >= 0.75 * f.rps ? 'met' : 'MISS',
      }),
    );
    // The first page of the catalog, against the same floor: the other read held to its speed.
    const w = await loadStep(child, 'GET /workflows ×32', { url: workflows, connections: 32, seconds: DURATION, headers: HEADERS });
    facts.listWorkflows = w.rps;
    rows.push(
      vsFloor(w, f, { group: 'Polling', name: 'GET /workflows, first page (floor: one run row)', clients: '32', target: '(informative)', verdict: '' }),
    );
    await countKinds(child, 'GET /runs/{id} (completed)', 20, () => httpJson('GET', `${app}/${id}`, { key: BENCH_KEY }));
    await profiled(child, 'GET /runs/{completed} ×32', () =>
      hammer({ url: `${app}/${id}`, connections: 32, seconds: Math.min(3, DURATION), headers: HEADERS }),
    );
  }
  await closeChild(child);
}
