import { statement } from '../db/statement.ts';

/**
 * The first statement of a transaction whose statements are to run on their prepared statements'
 * cached generic plans (`plan_cache_mode` for this transaction only), never planned again for their
 * values. Postgres otherwise keeps planning anew, on every execution, a statement that takes an array
 * of ids (`= any($1)`, `unnest($1)`): a generic plan's estimate for an array of unknown length never
 * beats a custom plan's for the one at hand, and planning a statement over `runs` (many partial
 * indexes to consider) costs more than running it. Sent first in every message of sendTogether
 * (src/db/group-commit.ts: the group commits and inOneMessage) and nowhere else: those statements read
 * by primary key or through indexes whose predicates are literals. See docs/round-trips.md#generic-plans.
 */
export const GENERIC_PLANS = statement('generic_plans', `select set_config('plan_cache_mode', 'force_generic_plan', true)`, []);
