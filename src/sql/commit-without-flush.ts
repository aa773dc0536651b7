import { statement } from '../db/statement.ts';

/**
 * The first statement of a transaction whose commit need not wait for its WAL to reach the disk
 * (`synchronous_commit` off for this transaction only). Only for transactions that a crash of the
 * database server may undo without harm, because what they did is done again: see
 * docs/round-trips.md#commits-that-do-not-wait-for-the-disk. Any later commit that waits (an acceptance,
 * a settlement) also makes this one durable, since the log is written in order.
 */
export const COMMIT_WITHOUT_FLUSH = statement('commit_without_flush', `select set_config('synchronous_commit', 'off', true)`, []);
