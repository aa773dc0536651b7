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
