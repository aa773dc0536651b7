import { statement } from '../db/statement.ts';

/**
 * The `run_events` table: every event of a run is inserted by `runEventsCte` below, inside the statement
 * that writes the run row and bumps `runs.last_sequence`, so sequences stay gap-free per run and an event
 * exists if and only if its write did. Its users: FENCED_WRITE / FENCED_WRITE_STATE (src/sql/fenced-write.ts, every
 * run operation: src/runs/fenced-write.ts) and FINISH_RUN (src/sql/runs.ts). The one other insert is
 * acceptance's `run.queued` (sequence 1, in the CTE of src/sql/accept-run.ts), written with the run itself.
 */

/**
 * A CTE inserting the events given as three parallel arrays ($types text[], $nodes text[], $data text[]
 * of JSON texts), numbered after the run's previous last sequence: `u` is the CTE that updated the run,
 * returning its id and new last_sequence. `returning`: the CTE returns the inserted sequences, so a later
 * CTE can make it run first (an unreferenced CTE runs after the statement's main query).
 */
export const runEventsCte = (types: string, nodes: string, data: string, opts: { returning?: boolean } = {}) => `e as (
  insert into run_events (run_id, sequence, type, node_id, data, ts)
  select u.id, u.last_sequence - cardinality(${types}::text[]) + v.ord, v.type, v.node_id, v.data::jsonb, clock_timestamp()
    from u cross join unnest(${types}::text[], ${nodes}::text[], ${data}::text[]) with ordinality as v(type, node_id, data, ord)
   order by v.ord${opts.returning ? '\n  returning sequence' : ''})`;

/** $1 run id, $2 after this sequence, $3 at most: the run's events in order. */
export const READ_RUN_EVENTS = statement(
  'read_run_events',
  'select type, sequence, ts, node_id, data from run_events where run_id = $1 and sequence > $2 order by sequence asc limit $3',
);

/** $1 run id, $2 node id: what an earlier attempt of an I/O step already wrote (src/engine/execute-step.ts). */
export const NODE_STREAM_SO_FAR = statement(
  'node_stream_so_far',
  `select type, data from run_events where run_id = $1 and node_id = $2 and type in ('node.started', 'node.output.delta') order by sequence`,
);
