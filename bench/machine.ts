import { readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';

/** The machine description printed with the results, and CPU accounting per load step (Linux /proc). */

export interface Machine {
  cpu: string;
  cores: number;
  memoryGiB: number;
  node: string;
  os: string;
  loadAvg: string;
  date: string;
}

export function describeMachine(): Machine {
  const cpus = os.cpus();
  return {
    cpu: cpus[0]?.model.trim() ?? 'unknown',
    cores: cpus.length,
    memoryGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    loadAvg: os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' '),
    date: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
  };
}

const TICK_MS = 10; // USER_HZ is 100 on Linux

function readStat(pid: number | 'self'): { ticks: number; comm: string } | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const close = text.lastIndexOf(')');
    const comm = text.slice(text.indexOf('(') + 1, close);
    const fields = text.slice(close + 2).split(' ');
    // fields[0] is field 3 (state); utime is field 14, stime field 15.
    return { ticks: Number(fields[11]) + Number(fields[12]), comm };
  } catch {
    return null;
  }
}

/** CPU time (user + system, ms) a process has used so far; NaN when it cannot be read. */
export function processCpuMs(pid: number): number {
  const s = readStat(pid);
  return s ? s.ticks * TICK_MS : NaN;
}

/**
 * CPU ticks of the local Postgres server's processes that work for `database`: its backends and the
 * shared background processes (WAL writer, checkpointer…); backends of other databases are left out.
 */
function postgresTicks(database: string | null): Map<number, number> {
  const out = new Map<number, number>();
  if (database === null) return out;
  let pids: string[] = [];
  try {
    pids = readdirSync('/proc').filter((d) => /^\d+$/.test(d));
  } catch {
    return out;
  }
  for (const p of pids) {
    const s = readStat(Number(p));
    if (!s || !s.comm.startsWith('postgres')) continue;
    let title = '';
    try {
      title = readFileSync(`/proc/${p}/cmdline`, 'utf8').replace(/\0/g, ' ').trim();
    } catch {
      continue;
    }
    // A backend's title is "postgres: [cluster: ]user database host(port) state".
    const backend = /^postgres: (?:\S+: )?(\S+) (\S+) (\S+\(\d+\)|\[local\])/.exec(title);
    if (backend && backend[2] !== database) continue;
    out.set(Number(p), s.ticks);
  }
  return out;
}

function machineTicks(): { busy: number; total: number } {
  try {
    const [line] = readFileSync('/proc/stat', 'utf8').split('\n');
    const v = line!.trim().split(/\s+/).slice(1).map(Number);
    const idle = (v[3] ?? 0) + (v[4] ?? 0);
    const total = v.reduce((a, b) => a + b, 0);
    return { busy: total - idle, total };
  } catch {
    return { busy: NaN, total: NaN };
  }
}

export interface CpuSplit {
  /** Percent of one core, over the step's wall time. */
  server: number;
  loadGenerator: number;
  /** Every local `postgres` process (NaN when the server is not local or not visible). */
  postgres: number;
  /** The whole machine, percent of all cores (100 = every core busy). */
  machine: number;
  /** Everything else on the machine (other processes, the kernel), percent of one core. */
  other: number;
}

/**
 * Starts CPU accounting; `stop(serverCpuMs)` returns the split over the elapsed wall time. `database`:
 * the bench database on a local Postgres server (null when embedded or on another machine).
 */
export function cpuMeter(database: string | null): { stop(serverCpuMs: number): CpuSplit } {
  const t0 = performance.now();
  const self0 = process.cpuUsage();
  const pg0 = postgresTicks(database);
  const m0 = machineTicks();
  return {
    stop(serverCpuMs: number): CpuSplit {
      const wall = performance.now() - t0;
      const self = process.cpuUsage(self0);
      const pg1 = postgresTicks(database);
      let pgTicks = 0;
      for (const [pid, t] of pg1) pgTicks += t - (pg0.get(pid) ?? 0);
      const m1 = machineTicks();
      const server = (serverCpuMs / wall) * 100;
      const loadGenerator = ((self.user + self.system) / 1000 / wall) * 100;
      const pgCpu = database !== null && pg1.size ? ((pgTicks * TICK_MS) / wall) * 100 : NaN;
      const machine = ((m1.busy - m0.busy) / (m1.total - m0.total)) * 100;
      const cores = os.cpus().length;
      // Without a local server in use, the machine's postgres processes (someone else's) count as "other".
      return {
        server,
        loadGenerator,
        postgres: pgCpu,
        machine,
        other: Math.max(0, machine * cores - server - loadGenerator - (Number.isNaN(pgCpu) ? 0 : pgCpu)),
      };
    },
  };
}
