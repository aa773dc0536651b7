import { ADMITTED_PHASES, LIVE_STATUSES, sqlList, type RunPhase, type RunStatus } from '../../domain/run-status.ts';

/**
 * The run predicates that several statements and the runs table's partial indexes share, built from the
 * typed values of src/domain/run-status.ts. The index predicates (src/db/entities/index.ts) are these
 * texts without an alias; a statement meant to use such an index repeats its predicate, so it takes it
 * from here. `alias`: the alias of `runs` in the statement, or none.
 */

const column = (alias: string | undefined, name: string) => (alias ? `${alias}.${name}` : name);
const statusIs = (alias: string | undefined, status: RunStatus, op: '=' | '<>' = '=') => `${column(alias, 'status')} ${op} '${status}'`;
const phaseIs = (alias: string | undefined, phase: RunPhase, op: '=' | '<>' = '=') => `${column(alias, 'phase')} ${op} '${phase}'`;
/** Statuses of a started run that has not ended. */
const STARTED_STATUSES = ['running', 'suspended'] as const satisfies readonly RunStatus[];

/** Waiting in the queue (the predicate of runs_queue_fair_idx). */
export const queuedRun = (alias?: string): string => `${statusIs(alias, 'pending')} and ${phaseIs(alias, 'queued')}`;

/** Waiting for a delayed start, outside the line (the predicate of runs_scheduled_idx). */
export const scheduledRun = (alias?: string): string => `${statusIs(alias, 'pending')} and ${phaseIs(alias, 'scheduled')}`;

/** Admitted and not yet running: the engine starts (`starting`) or funds (`preparing`) it. */
export const admittedRun = (alias?: string): string => `${statusIs(alias, 'pending')} and ${column(alias, 'phase')} in ${sqlList(ADMITTED_PHASES)}`;

/**
 * In flight: running, suspended, or admitted (the predicate of runs_in_flight_idx), what RUN_CAPACITY
 * and an account's max_concurrent_runs bound. Unparenthesised, as the index holds it.
 */
export const IN_FLIGHT = `status in ${sqlList(STARTED_STATUSES)} or (${admittedRun()})`;
/** IN_FLIGHT of a statement's `runs` alias, parenthesised to combine. */
export const inFlightRun = (alias?: string): string => `(${column(alias, 'status')} in ${sqlList(STARTED_STATUSES)} or (${admittedRun(alias)}))`;

/** Not terminal yet: the statuses a run can still leave. */
export const liveRun = (alias?: string): string => `${column(alias, 'status')} in ${sqlList(LIVE_STATUSES)}`;
