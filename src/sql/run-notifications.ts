import { statement } from '../db/statement.ts';
import { RunSchema } from '../db/entities/index.ts';

/**
 * What the run event bus across processes sends and reads on its own `pg` connection
 * (src/services/events/pg-bus.ts): NOTIFY payloads and, after a reconnect, where runs' logs are.
 */

/** $1 run ids: each run's newest event sequence. */
export const RUN_LAST_SEQUENCES = statement('run_last_sequences', 'select id::text as id, last_sequence from runs where id = any($1::uuid[])', [RunSchema]);

/** $1 channel, $2 payloads: one NOTIFY per payload, in one statement. */
export const NOTIFY_EACH = statement('notify_each', 'select pg_notify($1, p) from unnest($2::text[]) as p', []);

/** $1 channel, $2 payload. */
export const NOTIFY_ONE = statement('notify_one', 'select pg_notify($1, $2)', []);

/**
 * The runs $2 as they are now, notified on channel $1 in one payload (`<id>:<last_sequence>,…`), which
 * it returns as `told`: the NOTIFY a group of settlements carries when the bus lets it
 * (src/runs/notify-in-settlement.ts). No row when none of the runs exists.
 */
export const NOTIFY_RUNS_WRITTEN = statement(
  'notify_runs_written',
  `select x.told, pg_notify($1, x.told) from (
     select string_agg(id::text || ':' || last_sequence, ',') as told from runs where id = any($2::uuid[])) x
   where x.told is not null`,
  [RunSchema],
);
