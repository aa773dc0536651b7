import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { ServerChild } from './child.ts';
import { hammer, type LoadResult } from './load.ts';
import { cpuMeter } from './machine.ts';
import { aborted, kinds, notes, profiles, steps, type StepReport } from './results.ts';
import { CAPACITY, DATABASE_URL, DB_LOCAL, log, PROFILE, sleep, WARMUP } from './settings.ts';
import { sqlKind, wallNow, type ProfileSummary, type Row, type StepStats } from './shared.ts';

/** What every part of `npm run bench` measures with: fresh databases, server children, measured steps. */

export const tempDirs: string[] = [];

export async function freshDatabase(): Promise<{ databaseUrl?: string; dataDir: string }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'wr-bench-data-'));
  tempDirs.push(dataDir);
  if (!DATABASE_URL) return { dataDir };
  const client = new pg.Client({ connectionString: DATABASE_URL });
  await client.connect();
  await client.query('drop schema if exists public cascade; create schema public');
  await client.end();
  return { databaseUrl: DATABASE_URL, dataDir };
}

export async function closeChild(child: ServerChild): Promise<void> {
  await child.close();
  aborted.requests += child.abortedRequests;
}

export async function startChild(
  engine: 'null' | 'embedded',
  extra: { keys?: string[]; accounts?: string[]; track?: boolean; runCapacity?: number; publishTimes?: boolean } = {},
): Promise<ServerChild> {
  const db = await freshDatabase();
  const child = await ServerChild.start({
    engine,
    ...db,
    runCapacity: extra.runCapacity ?? CAPACITY,
    extraKeys: extra.keys ?? [],
    extraAccounts: extra.accounts ?? [],
    floor: true,
    track: extra.track ?? false,
    publishTimes: extra.publishTimes ?? false,
  });
  return child;
}

interface DbCounters {
  commits: number;
  walSyncs: number;
  walBytes: number;
}

async function dbCounters(client: pg.Client): Promise<DbCounters> {
  const { rows: r } = await client.query<{ c: string; s: string; b: string }>(
    `select (select xact_commit from pg_stat_database where datname = current_database()) as c, wal_sync as s, wal_bytes as b from pg_stat_wal`,
  );
  return { commits: Number(r[0]!.c), walSyncs: Number(r[0]!.s), walBytes: Number(r[0]!.b) };
}

/**
 * Postgres server only, while a step runs: samples pg_stat_activity of the bench database every 50 ms
 * (backends by wait event, and which statements wait on a lock), and the step's commits, WAL syncs and
 * WAL bytes (pg_stat_database / pg_stat_wal: cumulative statistics that busy backends flush about once
 * a second, so a step's delta is shifted by up to a second: approximate, which the warm-up before each
 * step of the same load mostly evens out).
 */
function dbSampler(): { stop(ops: number): Promise<{ waits: string; perOp: string }> } {
  if (!DATABASE_URL) return { stop: async () => ({ waits: 'n/a (PGlite)', perOp: 'n/a' }) };
  const client = new pg.Client({ connectionString: DATABASE_URL });
  const counts = new Map<string, number>();
  const blocked = new Map<string, number>();
  let samples = 0;
  let running = true;
  let before: DbCounters | null = null;
  const connected = client.connect().then(async () => {
    before = await dbCounters(client);
  });
  const loop = (async () => {
    await connected;
    while (running) {
      const { rows: r } = await client.query<{ w: string; q: string }>(
        `select coalesce(wait_event_type || ':' || wait_event, 'CPU') || case when state = 'idle in transaction' then ' (idle in tx)' else '' end as w,
                case when wait_event_type = 'Lock' then left(query, 400) end as q
           from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid() and state <> 'idle'`,
      );
      samples++;
      for (const x of r) {
        counts.set(x.w, (counts.get(x.w) ?? 0) + 1);
        if (x.q) blocked.set(sqlKind(x.q), (blocked.get(sqlKind(x.q)) ?? 0) + 1);
      }
      await sleep(50);
    }
  })().catch(() => undefined);
  return {
    async stop(ops) {
      running = false;
      await loop;
      let perOp = 'n/a';
      try {
        const after = await dbCounters(client);
        if (before && ops > 0) {
          const d = (k: keyof DbCounters) => (after[k] - before![k]) / ops;
          perOp = `${d('commits').toFixed(1)} commits, ${d('walSyncs').toFixed(1)} WAL syncs, ${(d('walBytes') / 1024).toFixed(1)} KiB WAL`;
        }
      } catch {
        /* statistics unavailable */
      }
      await client.end().catch(() => undefined);
      if (!samples) return { waits: 'n/a', perOp };
      const top = [...counts.entries()].sort((a, b) => b[1] - a[1]).slice(0, 3);
      const locks = [...blocked.entries()].sort((a, b) => b[1] - a[1]).slice(0, 3);
      const text = top.map(([w, n]) => `${w} ${(n / samples).toFixed(1)}`).join(', ') || 'idle';
      return { waits: locks.length ? `${text}; waiting on a lock: ${locks.map(([q, n]) => `${q} ${(n / samples).toFixed(1)}`).join(', ')}` : text, perOp };
    },
  };
}

/** The server child's wall clock minus the driver's (ms), from the quickest of 20 round trips. */
export async function clockOffset(child: ServerChild): Promise<number> {
  let best = { rtt: Infinity, offset: 0 };
  for (let i = 0; i < 20; i++) {
    const t0 = wallNow();
    const tc = await child.call<number>({ cmd: 'clock' });
    const t1 = wallNow();
    if (t1 - t0 < best.rtt) best = { rtt: t1 - t0, offset: tc - (t0 + t1) / 2 };
  }
  return best.offset;
}

/** Waits until the server ran no SQL for 250 ms (requests of the previous step may still be queued). */
export async function quiesce(child: ServerChild): Promise<void> {
  const deadline = performance.now() + 15_000;
  while (performance.now() < deadline) {
    await child.call({ cmd: 'stepStart' });
    await sleep(250);
    const s = await child.call<StepStats>({ cmd: 'stepEnd' });
    if (s.sql.statements <= 1) return;
  }
}

/** One measured step: server counters, CPU split and Postgres waits around `fn`. */
export async function measured<T extends { ops: number }>(child: ServerChild, name: string, fn: () => Promise<T>): Promise<T & { step: StepReport }> {
  await quiesce(child);
  await child.call({ cmd: 'stepStart' });
  const cpu = cpuMeter(DATABASE_URL && DB_LOCAL ? new URL(DATABASE_URL).pathname.slice(1) || 'postgres' : null);
  const db = dbSampler();
  const out = await fn();
  const server = await child.call<StepStats>({ cmd: 'stepEnd' });
  const split = cpu.stop(server.cpuMs);
  const { waits, perOp } = await db.stop(out.ops);
  const step: StepReport = { name, ops: out.ops, server, cpu: split, waits, db: perOp };
  steps.push(step);
  return { ...out, step };
}

export async function loadStep(child: ServerChild, name: string, opts: Parameters<typeof hammer>[0]): Promise<LoadResult & { step: StepReport }> {
  if (WARMUP > 0) await hammer({ ...opts, seconds: WARMUP });
  const r = await measured(child, name, async () => {
    const res = await hammer(opts);
    return { ...res, ops: res.ok };
  });
  if (r.failed) notes.push(`${name}: ${r.failed} failed responses (${JSON.stringify(r.statuses)})`);
  log(`${name}: ${r.rps.toFixed(0)} req/s, p50 ${r.p50.toFixed(2)} ms, p99 ${r.p99.toFixed(2)} ms`);
  return r;
}

export async function countKinds(child: ServerChild, name: string, n: number, op: () => Promise<unknown>): Promise<void> {
  await quiesce(child);
  await child.call({ cmd: 'stepStart', countSql: true });
  for (let i = 0; i < n; i++) await op();
  const s = await child.call<StepStats>({ cmd: 'stepEnd' });
  kinds.push({ name, per: n, sql: s.sql });
}

export async function profiled(child: ServerChild, name: string, fn: () => Promise<unknown>): Promise<void> {
  if (!PROFILE) return;
  await quiesce(child);
  await child.call({ cmd: 'stepStart', countSql: true });
  await child.call({ cmd: 'profileStart' });
  await fn();
  const { summary, file } = await child.call<{ summary: ProfileSummary; file: string }>({ cmd: 'profileStop' });
  const s = await child.call<StepStats>({ cmd: 'stepEnd' });
  profiles.push({ name, summary, file, sql: s.sql });
}

export const ratio = (a: number, b: number) => (b > 0 ? `${((a / b) * 100).toFixed(0)} %` : '—');
export const rate = (r: number, unit = 'req/s') => `${r >= 100 ? r.toFixed(0) : r.toFixed(1)} ${unit}`;

/** A table row: the service's step `a` against the same load on the floor, `f`. */
export function vsFloor(a: LoadResult, f: LoadResult, row: Pick<Row, 'group' | 'name' | 'clients' | 'target' | 'verdict'>): Row {
  return {
    group: row.group,
    name: row.name,
    clients: row.clients,
    value: rate(a.rps),
    p50: a.p50,
    p99: a.p99,
    baseline: `floor ${rate(f.rps)}`,
    baseP50: f.p50,
    baseP99: f.p99,
    ratio: ratio(a.rps, f.rps),
    target: row.target,
    verdict: row.verdict,
  };
}
