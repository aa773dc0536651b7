import type { Em } from '../../db/orm.ts';

export interface NewRunEvent {
  type: string;
  nodeId?: string | null;
  data?: Record<string, string>;
}

/**
 * Appends events to a run's log inside the caller's transaction. Sequences are allocated by bumping
 * `runs.last_sequence`, whose row lock serialises writers of one run, so sequences are gap-free and
 * strictly increasing per run whatever the number of processes. Returns the new last sequence.
 */
export async function appendRunEvents(em: Em, runId: string, events: NewRunEvent[]): Promise<number> {
  if (events.length === 0) return currentSequence(em, runId);
  const [row] = await em.execute<{ last_sequence: number }[]>(
    'update runs set last_sequence = last_sequence + ?, updated_at = now() where id = ? returning last_sequence',
    [events.length, runId],
  );
  if (!row) throw new Error(`run ${runId} does not exist`);
  const last = Number(row.last_sequence);
  const first = last - events.length + 1;
  const values: unknown[] = [];
  const tuples = events.map((e, i) => {
    values.push(runId, first + i, e.type, e.nodeId ?? null, JSON.stringify(e.data ?? {}));
    return '(?, ?, ?, ?, ?::jsonb, clock_timestamp())';
  });
  await em.execute(`insert into run_events (run_id, sequence, type, node_id, data, ts) values ${tuples.join(', ')}`, values);
  return last;
}

async function currentSequence(em: Em, runId: string): Promise<number> {
  const [row] = await em.execute<{ last_sequence: number }[]>('select last_sequence from runs where id = ?', [runId]);
  return Number(row?.last_sequence ?? 0);
}
