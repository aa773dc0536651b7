import { kinds, profiles, rows, steps, type StepReport } from './results.ts';
import { ACCOUNTS, HOT, LIVE_EVENTS, USERS } from './settings.ts';

/** The printed report of `npm run bench`: the results table, where the time went, the bottleneck. */

export function table(): string {
  const f = (n?: number) => (n === undefined || Number.isNaN(n) ? '' : n.toFixed(n < 10 ? 2 : 1));
  const lines = [
    '| benchmark | clients | result | p50 ms | p99 ms | baseline (same run) | base p50 | base p99 | vs baseline | target | |',
    '|---|---:|---:|---:|---:|---|---:|---:|---:|---|---|',
  ];
  for (const r of rows) {
    lines.push(
      `| ${r.group}: ${r.name} | ${r.clients} | ${r.value} | ${f(r.p50)} | ${f(r.p99)} | ${r.baseline} | ${f(r.baseP50)} | ${f(r.baseP99)} | ${r.ratio} | ${r.target} | ${r.verdict === 'MISS' ? '**MISS**' : r.verdict} |`,
    );
  }
  return lines.join('\n');
}

export function stepTable(): string {
  const p = (n: number) => (Number.isNaN(n) ? 'n/a' : `${n.toFixed(0)} %`);
  const lines = [
    '| step | ops | server CPU | Postgres CPU | load generator CPU | other processes | machine busy (all cores) | event-loop delay p99 | SQL statements / op | Postgres per op | Postgres backends (mean) by wait |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|',
  ];
  for (const s of steps) {
    lines.push(
      `| ${s.name} | ${s.ops} | ${p(s.cpu.server)} | ${p(s.cpu.postgres)} | ${p(s.cpu.loadGenerator)} | ${p(s.cpu.other)} | ${p(s.cpu.machine)} | ${s.server.eventLoopDelay.p99.toFixed(1)} ms | ${(s.server.sql.statements / Math.max(1, s.ops)).toFixed(1)} | ${s.db} | ${s.waits} |`,
    );
  }
  return lines.join('\n');
}

export function kindsText(): string {
  return kinds
    .map((k) => {
      const per = (n: number) => (n / k.per).toFixed(n % k.per === 0 ? 0 : 1);
      const list = Object.entries(k.sql.byKind)
        .map(([kind, n]) => `${per(n)}× ${kind}`)
        .join('; ');
      return `- ${k.name}: ${per(k.sql.statements)} statements — ${list}`;
    })
    .join('\n');
}

export function profilesText(): string {
  return profiles
    .map((p) => {
      const pct = (ms: number) => `${((ms / p.summary.totalMs) * 100).toFixed(0)} %`;
      const cats = p.summary.categories
        .slice(0, 8)
        .map(([c, ms]) => `${c} ${pct(ms)}`)
        .join(', ');
      const fns = p.summary.functions
        .slice(0, 6)
        .map(([f, ms]) => `${f} ${pct(ms)}`)
        .join('; ');
      const total = Object.values(p.sql.msByKind).reduce((a, b) => a + b, 0);
      const slow = Object.entries(p.sql.msByKind)
        .slice(0, 6)
        .map(([k, ms]) => `${k} ${((ms / Math.max(1, total)) * 100).toFixed(0)} % (${(ms / Math.max(1, p.sql.byKind[k] ?? 1)).toFixed(1)} ms each)`)
        .join('; ');
      return (
        `- ${p.name} (${(p.summary.totalMs / 1000).toFixed(1)} s of server CPU sampled, profile ${p.file}): ${cats}.\n  Heaviest functions: ${fns}.` +
        `\n  Statement latency by kind in this step (issue → result, connection wait included): ${slow}; ` +
        `slowest: ${p.sql.slowest.map(([ms, k]) => `${k} ${ms} ms`).join(', ')}.`
      );
    })
    .join('\n');
}

export function bottleneck(): string {
  const out: string[] = [];
  const step = (prefix: string) => steps.find((s) => s.name.startsWith(prefix));
  const perOp = (s: StepReport) => {
    const server = s.server.cpuMs / Math.max(1, s.ops);
    const pgMs = Number.isNaN(s.cpu.postgres) ? NaN : ((s.cpu.postgres / 100) * s.server.wallMs) / Math.max(1, s.ops);
    return `${server.toFixed(2)} ms of server CPU${Number.isNaN(pgMs) ? '' : ` and ${pgMs.toFixed(2)} ms of Postgres CPU`} per operation`;
  };
  const busy = (s: StepReport) =>
    `machine ${s.cpu.machine.toFixed(0)} % busy (server ${s.cpu.server.toFixed(0)} % of a core, Postgres ${Number.isNaN(s.cpu.postgres) ? 'n/a' : `${s.cpu.postgres.toFixed(0)} %`}, ` +
    `load generator ${s.cpu.loadGenerator.toFixed(0)} %, other processes ${s.cpu.other.toFixed(0)} %), event-loop delay p99 ${s.server.eventLoopDelay.p99.toFixed(1)} ms`;
  const top = (name: string) => {
    const p = profiles.find((x) => x.name === name);
    if (!p) return '';
    const cats = p.summary.categories.slice(0, 5).map(([c, ms]) => `${c} ${((ms / p.summary.totalMs) * 100).toFixed(0)} %`);
    return ` Server CPU profile: ${cats.join(', ')}.`;
  };
  const a = step('POST /runs ×32');
  const fl = step('floor POST ×32');
  if (a && fl) {
    out.push(
      `- POST /runs ×32: ${busy(a)}; ${perOp(a)}, ${(a.server.sql.statements / Math.max(1, a.ops)).toFixed(1)} SQL statements per request; ` +
        `the floor: ${perOp(fl)}, 5 statements.${top('POST /runs ×32')}`,
    );
  }
  const e = step('end-to-end');
  if (e) {
    out.push(
      `- End-to-end ×${USERS}, one account: ${busy(e)}; ${perOp(e)}, ${(e.server.sql.statements / Math.max(1, e.ops)).toFixed(1)} SQL statements ` +
        `per run (acceptance included); Postgres per run: ${e.db}; backends by wait: ${e.waits}.${top(`end-to-end ×${USERS}`)}`,
    );
  }
  const es = steps.find((s) => s.name.startsWith('end-to-end') && s.name.includes('accounts'));
  if (es) out.push(`- End-to-end over ${ACCOUNTS} accounts: ${busy(es)}; ${perOp(es)}; backends by wait: ${es.waits}.`);
  const lv = step('live event');
  if (lv) {
    out.push(
      `- Live event to ${HOT} followers: ${(lv.server.sql.statements / LIVE_EVENTS).toFixed(0)} SQL statements per published event (its append included; followers at one cursor ` +
        `share one read of the log), event-loop delay p99 ${lv.server.eventLoopDelay.p99.toFixed(1)} ms.`,
    );
  }
  return out.join('\n');
}
