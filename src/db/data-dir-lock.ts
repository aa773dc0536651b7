import { linkSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Embedded PGlite is single-writer: two processes on one data directory lose or corrupt writes, and
 * neither notices. The process that opens the directory holds `<dir>/wr.lock`, a file naming its pid;
 * anyone else is refused at once. A lock left by a process that is gone (crash, kill -9), or that has
 * exited and waits only to be reaped (a zombie), is taken over.
 */

export interface LockOwner {
  pid: number;
  /** What holds it: `npm start`, `npm run catalog`, … */
  role: string;
  /** The server's port, when the holder is a server. */
  port?: number;
  since: string;
  /** The holder's start time in clock ticks since boot (Linux), so a recycled pid is not taken for it. */
  startTime?: string;
}

export class DataDirLockedError extends Error {
  readonly code = 'data_dir_locked';
  constructor(
    readonly dir: string,
    readonly owner: LockOwner,
  ) {
    const who = `process ${owner.pid} (${owner.role}${owner.port !== undefined ? ` on port ${owner.port}` : ''}, since ${owner.since})`;
    super(
      `DATA_DIR ${dir} is in use by ${who}: the embedded database takes one process at a time; ` +
        'stop that process first, or give this one another DATA_DIR (or a DATABASE_URL)',
    );
  }
}

export interface DataDirLock {
  readonly file: string;
  release(): void;
}

export const LOCK_FILE = 'wr.lock';

/** Takes the lock of `dir` (which must exist) or throws DataDirLockedError naming the live holder. */
export function lockDataDir(dir: string, who: { role: string; port?: number }): DataDirLock {
  const file = join(dir, LOCK_FILE);
  const started = processStat(process.pid)?.startTime;
  const owner: LockOwner = {
    pid: process.pid,
    role: who.role,
    ...(who.port !== undefined ? { port: who.port } : {}),
    since: new Date().toISOString(),
    ...(started ? { startTime: started } : {}),
  };
  // Written whole under a private name, then linked into place: link fails if the lock exists, so the
  // lock file is never seen half-written and two starters cannot both create it.
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(owner));
  try {
    for (let attempt = 0; ; attempt++) {
      try {
        linkSync(tmp, file);
        break;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
        const holder = readOwner(file);
        if (holder && holder.pid !== process.pid && alive(holder)) throw new DataDirLockedError(dir, holder);
        if (attempt > 2) throw err;
        // Stale (its process is gone) or unreadable: take it over.
        try {
          unlinkSync(file);
        } catch {
          // removed by someone else meanwhile; try again
        }
      }
    }
  } finally {
    try {
      unlinkSync(tmp);
    } catch {
      // already gone
    }
  }
  let held = true;
  const release = () => {
    if (!held) return;
    held = false;
    process.off('exit', release);
    // Only our own lock: never remove one a successor took over.
    if (readOwner(file)?.pid === process.pid) {
      try {
        unlinkSync(file);
      } catch {
        // already gone
      }
    }
  };
  // A process that exits without closing (an uncaught error, process.exit) leaves no lock behind.
  process.on('exit', release);
  return { file, release };
}

/** The holder recorded in `dir`'s lock, if that process is alive. */
export function liveLockOwner(dir: string): LockOwner | null {
  const holder = readOwner(join(dir, LOCK_FILE));
  return holder && alive(holder) ? holder : null;
}

function readOwner(file: string): LockOwner | null {
  try {
    const parsed = JSON.parse(readFileSync(file, 'utf8')) as LockOwner;
    return Number.isInteger(parsed.pid) && parsed.pid > 0 ? parsed : null;
  } catch {
    return null;
  }
}

function alive(owner: LockOwner): boolean {
  try {
    process.kill(owner.pid, 0);
  } catch (err) {
    // EPERM: it exists but belongs to another user.
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  // Without /proc (not Linux) the signal probe above is all there is.
  const stat = processStat(owner.pid);
  if (!stat) return true;
  // A killed process stays a zombie until its parent reaps it, and the signal probe still reaches it; but
  // it has already closed every file, so it holds nothing and a supervisor's immediate restart may go on.
  if (GONE_STATES.has(stat.state)) return false;
  // After a restart (a container's, say) the holder's pid may belong to some other process now.
  return !owner.startTime || stat.startTime === owner.startTime;
}

/** Zombie, and dead (`X`, or `x` on older kernels): states of a process that has exited. */
const GONE_STATES = new Set(['Z', 'X', 'x']);

/**
 * Fields 3 (state) and 22 (start time in clock ticks since boot) of /proc/<pid>/stat; the fields after
 * the parenthesised command name start at field 3.
 */
function processStat(pid: number): { state: string; startTime: string } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { state: fields[0], startTime: fields[19] };
  } catch {
    return undefined;
  }
}
