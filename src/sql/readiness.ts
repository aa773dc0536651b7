import { statement } from '../db/statement.ts';

/** The database half of GET /readyz (src/http/health.ts): any answer means the database is reachable. */
export const READINESS_CHECK = statement('readiness_check', `select 1`, []);
