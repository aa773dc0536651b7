import type { Pool } from 'pg';

/**
 * The server process ids of a pool's open connections. A statement may NOTIFY the run event bus's
 * channel itself (src/services/events/pg-bus.ts); the bus of the same process knows by these ids that
 * such a notification is its own, already delivered to its readers.
 */
const byPool = new WeakMap<Pool, Set<number>>();

/** Keeps the set of `pool`'s backend process ids as its connections open and close. */
export function watchBackends(pool: Pool): void {
  const pids = new Set<number>();
  byPool.set(pool, pids);
  const pidOf = (client: unknown) => (client as { processID?: number | null }).processID;
  pool.on('connect', (client) => {
    const pid = pidOf(client);
    if (typeof pid === 'number') pids.add(pid);
    // A connection that ends before the pool removes it (server restart) frees its id at once.
    client.once('end', () => {
      if (typeof pid === 'number') pids.delete(pid);
    });
  });
  pool.on('remove', (client) => {
    const pid = pidOf(client);
    if (typeof pid === 'number') pids.delete(pid);
  });
}

const NONE: ReadonlySet<number> = new Set();

/** The backend process ids of `pool`'s open connections (none before the pool exists). */
export function backendsOf(pool: Pool | undefined): ReadonlySet<number> {
  return (pool && byPool.get(pool)) ?? NONE;
}
