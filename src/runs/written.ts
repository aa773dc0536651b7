import { isoOrNull } from '../db/sql.ts';
import type { NewRunEvent } from '../domain/run-steps.ts';
import type { PublicRunEvent } from './run-views.ts';

/**
 * What a write added to a run's log: its new last sequence and its events as a read of the log returns
 * them. The writer hands it to the bus after the commit (publish), and live readers of this process
 * deliver the events without reading them back (src/runs/follow-run-events.ts).
 */
export interface Written {
  last: number;
  events: PublicRunEvent[];
}

/** A writing statement's row (`last_sequence`, `events_ts`: src/sql/run-events.ts) and the events it was given. */
export function writtenBy(row: Record<string, unknown>, events: readonly NewRunEvent[]): Written {
  const last = Number(row.last_sequence);
  const ts = isoOrNull(row.events_ts);
  const first = last - events.length + 1;
  return {
    last,
    events: ts === null ? [] : events.map((e, i) => ({ type: e.type, sequence: first + i, ts, nodeId: e.nodeId ?? null, data: e.data ?? {} })),
  };
}

/** The writes of one transaction, in order (the run's row lock keeps their events contiguous), as one. */
export function together(...writes: (Written | null)[]): Written | null {
  const done = writes.filter((w): w is Written => w !== null);
  if (done.length === 0) return null;
  return { last: done[done.length - 1].last, events: done.flatMap((w) => w.events) };
}
