import { ACCEPT_RUNS } from '../../src/sql/accept-runs.ts';

/**
 * Holding acceptances in Postgres, to test what happens to a request whose acceptance waits there. Every
 * acceptance statement (ACCEPT_RUNS) writes idempotency records, so it takes that table's ROW EXCLUSIVE lock
 * as it starts; a transaction that holds the table in SHARE mode makes every acceptance wait until it ends
 * (and, of the service's other statements, only the sweep of expired records).
 */
export const HOLD_ACCEPTANCES = 'lock table idempotency_records in share mode';

/** A pg_stat_activity condition: the backend runs the acceptance statement. */
export const RUNS_ACCEPTANCE = `left(query, 100) = '${ACCEPT_RUNS.text.slice(0, 100).replaceAll("'", "''")}'`;
