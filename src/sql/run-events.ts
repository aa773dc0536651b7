import { statement } from '../db/statement.ts';
import { RunEventBatchSchema } from '../db/entities/index.ts';

/**
 * The event log (`run_event_batches`, docs/round-trips.md#the-event-log-in-batches): every write of a
 * run's events is ONE row, inserted by `runEventsCte` below inside the statement that writes the run row
 * and bumps `runs.last_sequence`, so sequences stay gap-free per run and an event exists if and only if
 * its write did. Its users: FENCED_WRITE / FENCED_WRITE_STATE (src/sql/fenced-write.ts, every run
 * operation: src/runs/fenced-write.ts); FINISH_RUNS (src/sql/finish-runs.ts), which ends runs, inserts
 * its runs' batches itself. The one other insert is acceptance's
 * `run.queued` (sequence 1, in the CTE of src/sql/accept-runs.ts), written with the run itself.
 */

/**
 * A CTE, `inserted_events`, inserting the events of `call` (a CTE of one row with the arrays `types`,
 * `node_ids` and `data`) as one batch ending at the run's new last sequence. `updatedRun` names the CTE
 * that updated the run, returning its id and new last_sequence. No events, no row. It returns the batch's
 * `ts`, which the statement answers as EVENTS_TS so that the writer can hand its events to live readers
 * as the log holds them.
 */
export const runEventsCte = (updatedRun: string, call: string) => `inserted_events as (
  insert into run_event_batches (run_id, last_sequence, types, node_ids, data, ts)
  select ${updatedRun}.id, ${updatedRun}.last_sequence, ${sameLength(call)}, ${call}.node_ids, ${call}.data, clock_timestamp()
    from ${updatedRun} cross join ${call} where cardinality(${call}.types) > 0
  returning ts)`;

/** The column of a writing statement's row holding runEventsCte's `ts` (null when it wrote no events). */
export const EVENTS_TS = `(select ts from inserted_events) as events_ts`;

/**
 * The types, or null (refused by the column's NOT NULL, so the whole statement writes nothing) when the
 * three arrays differ in length: readers unnest them side by side, and a short one would be padded with
 * nulls and number events past the batch's last sequence.
 */
const sameLength = (call: string) =>
  `case when cardinality(${call}.node_ids) = cardinality(${call}.types) and cardinality(${call}.data) = cardinality(${call}.types) then ${call}.types end`;

/**
 * From a batch `b`: its events `e` (type, node_id, data, ord) and each one's sequence `s.sequence`, the
 * batch's last numbered `b.last_sequence`.
 */
const BATCH_EVENTS = `cross join lateral unnest(b.types, b.node_ids, b.data) with ordinality as e(type, node_id, data, ord)
  cross join lateral (select b.last_sequence - cardinality(b.types) + e.ord::int as sequence) s`;

/**
 * $1 run id, $2 after this sequence, $3 at most: the run's events in order. It unnests at most $3 of the
 * batches that end after $2: each holds at least one event, so they hold the first $3 events after $2.
 * $2 is a bigint: a client's cursor may be any safe integer, beyond the integer column's range.
 */
export const READ_RUN_EVENTS = statement(
  'read_run_events',
  `select e.type, s.sequence, b.ts, e.node_id, e.data
     from (select * from run_event_batches where run_id = $1 and last_sequence > $2::bigint order by last_sequence limit $3) b
    ${BATCH_EVENTS}
    where s.sequence > $2::bigint order by s.sequence limit $3`,
  [RunEventBatchSchema],
);

/** $1 run id, $2 node id: what an earlier attempt of an I/O step already wrote (src/engine/execute-step.ts). */
export const NODE_STREAM_SO_FAR = statement(
  'node_stream_so_far',
  `select e.type, e.data
     from run_event_batches b
    ${BATCH_EVENTS}
    where b.run_id = $1 and e.node_id = $2 and e.type in ('node.started', 'node.output.delta')
    order by s.sequence`,
  [RunEventBatchSchema],
);
