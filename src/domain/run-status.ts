/**
 * The values a run's state columns take, declared once for every layer: the entity's column types,
 * the SQL predicates (src/db/entities/run-predicates.ts), the GraphQL enums (src/graphql/types/enums.ts). The
 * OpenAPI document's enums and the database's constraints and partial indexes are held to these by
 * tests (test/unit/openapi-enums.test.ts, test/db/run-values.test.ts). What they mean:
 * docs/design/rules.md#statuses-and-transitions.
 */

/** A run's status, as the API shows it. */
export const RUN_STATUSES = ['pending', 'running', 'suspended', 'completed', 'failed', 'cancelled'] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];
export const TERMINAL_STATUSES = ['completed', 'failed', 'cancelled'] as const satisfies readonly RunStatus[];
/** Statuses a run can still leave. */
export const LIVE_STATUSES = ['pending', 'running', 'suspended'] as const satisfies readonly RunStatus[];
/** A status in run lists (REST RunListStatus): a suspended run is listed as running. */
export const LIST_STATUSES = ['pending', 'running', 'completed', 'failed', 'cancelled'] as const satisfies readonly RunStatus[];
export type ListStatus = (typeof LIST_STATUSES)[number];

/**
 * A pending run's sub-state (the `phase` column; null once it leaves `pending`): `scheduled` waits for its
 * delayed start outside the line, `queued` waits in the line for capacity, `starting` was admitted,
 * `preparing` is being funded by the engine.
 */
export const RUN_PHASES = ['scheduled', 'queued', 'starting', 'preparing'] as const;
export type RunPhase = (typeof RUN_PHASES)[number];
/** Phases of a pending run that was admitted: it counts as in flight. */
export const ADMITTED_PHASES = ['starting', 'preparing'] as const satisfies readonly RunPhase[];

/** A completed run's outcome (null for every other status). */
export const OUTCOMES = ['completed', 'completed_with_issues'] as const;
export type Outcome = (typeof OUTCOMES)[number];
/** Whether a run's charge is final: `pending` until it is terminal. */
export const BILLING_STATUSES = ['pending', 'settled', 'not_charged'] as const;
export type BillingStatus = (typeof BILLING_STATUSES)[number];
/** A pending run's place as the API shows it (REST RunQueue.state): `waiting` in line, `starting` just left it. */
export const QUEUE_STATES = ['waiting', 'starting'] as const;
export type QueueState = (typeof QUEUE_STATES)[number];

/** The SQL list of values, for `in (…)`: the values are the constants above, never input. */
export const sqlList = (values: readonly string[]): string => `(${values.map((value) => `'${value}'`).join(', ')})`;
/** The SQL list of TERMINAL_STATUSES, for `status in (…)` / `not in (…)`. */
export const TERMINAL_SQL = sqlList(TERMINAL_STATUSES);
export const isTerminal = (s: string | null | undefined): boolean => s !== null && s !== undefined && (TERMINAL_STATUSES as readonly string[]).includes(s);

/** Reasons the service itself gives a failed run (shown to callers as `reason`). */
export const QUEUE_TIMEOUT_REASON = 'the run waited too long for capacity';
export const CREDENTIALS_TIMEOUT_REASON = 'the run waited too long for credentials';
export const COMPUTE_LIMIT_REASON = 'compute limit reached';
export const STUCK_GRAPH_REASON = 'the workflow cannot make progress';
