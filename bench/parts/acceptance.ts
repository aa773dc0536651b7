import { randomBytes } from 'node:crypto';
import { hammer, httpJson } from '../load.ts';
import { closeChild, countKinds, loadStep, profiled, rate, ratio, startChild, vsFloor } from '../measure.ts';
import { facts, notes, rows } from '../results.ts';
import { DURATION, HEADERS, log, ONLY, runBody } from '../settings.ts';
import { BENCH_KEY, WORKFLOW_3 } from '../shared.ts';

// Part 1 of `npm run bench` (bench/run.ts): run acceptance (and 3b. polling a queued run).

export async function acceptance(): Promise<void> {
  log('acceptance: starting the app (NullEngine) and the floor');
  const child = await startChild('null');
  const app = `${child.ready.appUrl}/v1/runs`;
  const floor = `${child.ready.floorUrl}/runs`;
  notes.push(`Floor database access: ${child.ready.floorDriver}.`);
  for (const c of [1, 32, 128]) {
    const a = await loadStep(child, `POST /runs ×${c}`, {
      url: app,
      method: 'POST',
      connections: c,
      seconds: DURATION,
      headers: HEADERS,
      body: runBody(WORKFLOW_3),
    });
    const f = await loadStep(child, `floor POST ×${c}`, {
      url: floor,
      method: 'POST',
      connections: c,
      seconds: DURATION,
      headers: HEADERS,
      body: runBody(WORKFLOW_3),
    });
    const targets: string[] = [];
    let ok = true;
    if (c >= 32) {
      targets.push('≥ 50 % of floor');
      ok &&= a.rps >= 0.5 * f.rps;
    }
    if (c === 32) {
      targets.push('p99 ≤ 25 ms');
      ok &&= a.p99 <= 25;
    }
    rows.push(
      vsFloor(a, f, {
        group: 'Run acceptance',
        name: 'POST /runs (no Idempotency-Key)',
        clients: String(c),
        target: targets.join(', ') || '—',
        verdict: targets.length ? (ok ? 'met' : 'MISS') : '',
      }),
    );
    facts[`accept${c}`] = a.rps;
    facts[`floor${c}`] = f.rps;
    facts[`acceptP50_${c}`] = a.p50;
    facts[`floorP50_${c}`] = f.p50;
    if (c === 32) facts.acceptSqlPerReq = a.step.server.sql.statements / Math.max(1, a.ok);
  }
  const idem = await loadStep(child, 'POST /runs ×32 + Idempotency-Key', {
    url: app,
    method: 'POST',
    connections: 32,
    seconds: DURATION,
    headers: HEADERS,
    body: JSON.stringify({ workflow: WORKFLOW_3, inputs: { name: 'Ada' }, idempotencyKey: 'bench-[<id>]' }),
    idReplacement: true,
  });
  rows.push({
    group: 'Run acceptance',
    name: 'POST /runs, unique Idempotency-Key each',
    clients: '32',
    value: rate(idem.rps),
    p50: idem.p50,
    p99: idem.p99,
    baseline: `floor ${rate(facts.floor32!)}`,
    ratio: ratio(idem.rps, facts.floor32!),
    target: '(informative)',
    verdict: '',
  });

  await countKinds(child, 'POST /runs', 20, () => httpJson('POST', app, { key: BENCH_KEY, body: JSON.parse(runBody(WORKFLOW_3)) }));
  await countKinds(child, 'POST /runs + Idempotency-Key', 20, () =>
    httpJson('POST', app, { key: BENCH_KEY, body: { workflow: WORKFLOW_3, inputs: { name: 'Ada' }, idempotencyKey: `k-${randomBytes(8).toString('hex')}` } }),
  );
  await profiled(child, 'POST /runs ×32', () =>
    hammer({ url: app, method: 'POST', connections: 32, seconds: Math.min(3, DURATION), headers: HEADERS, body: runBody(WORKFLOW_3) }),
  );

  if (ONLY.has('poll')) {
    const [depth] = await child.sql<{ n: number }>(`select count(*)::int as n from runs where status = 'pending' and phase = 'queued'`);
    const [last] = await child.sql<{ id: string }>(
      `select id from runs where status = 'pending' and phase = 'queued' order by queued_at desc, id desc limit 1`,
    );
    const id = String(last!.id);
    const a = await loadStep(child, `GET /runs/{queued} ×32`, { url: `${app}/${id}`, connections: 32, seconds: DURATION, headers: HEADERS });
    const f = await loadStep(child, `floor GET (queued) ×32`, { url: `${floor}/${id}`, connections: 32, seconds: DURATION });
    rows.push(vsFloor(a, f, { group: 'Polling', name: `GET /runs/{id}, queued run at position ${depth!.n}`, clients: '32', target: '—', verdict: '' }));
    facts.queueDepth = depth!.n;
    facts.pollQueued = a.rps;
    await countKinds(child, `GET /runs/{id} (queued, position ${depth!.n})`, 20, () => httpJson('GET', `${app}/${id}`, { key: BENCH_KEY }));
  }
  await closeChild(child);
}
