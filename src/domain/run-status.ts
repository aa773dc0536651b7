/** A run's status, and the statuses a run never leaves: declared once for every layer. */
export const RUN_STATUSES = ['pending', 'running', 'suspended', 'completed', 'failed', 'cancelled'] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];
export const TERMINAL_STATUSES: readonly RunStatus[] = ['completed', 'failed', 'cancelled'];
/** The SQL list of TERMINAL_STATUSES, for `status in (…)` / `not in (…)`. */
export const TERMINAL_SQL = `(${TERMINAL_STATUSES.map((s) => `'${s}'`).join(', ')})`;
export const isTerminal = (s: string | null | undefined): boolean => s !== null && s !== undefined && (TERMINAL_STATUSES as readonly string[]).includes(s);

/** Reasons the service itself gives a failed run (shown to callers as `reason`). */
export const QUEUE_TIMEOUT_REASON = 'the run waited too long for capacity';
export const CREDENTIALS_TIMEOUT_REASON = 'the run waited too long for credentials';
export const COMPUTE_LIMIT_REASON = 'compute limit reached';
export const STUCK_GRAPH_REASON = 'the workflow cannot make progress';
