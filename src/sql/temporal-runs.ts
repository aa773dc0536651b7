import { statement } from '../db/statement.ts';
import { admittedRun, liveRun } from './run-predicates.ts';

/**
 * The Temporal engine's reads and marks on `runs` (src/engine/temporal/temporal-engine.ts): a run whose
 * workflow was started carries `lease_owner = 'temporal'` (a column the embedded engine uses for leases).
 */

/** $1 seconds of grace: non-terminal Temporal runs whose workflow start was never marked, oldest first. */
export const UNSTARTED_TEMPORAL_RUNS = statement(
  'unstarted_temporal_runs',
  `select id, phase from runs
    where engine = 'temporal' and ${liveRun()} and lease_owner is null
      and created_at < clock_timestamp() - make_interval(secs => $1)
    order by created_at, id limit 200`,
);

/** $1 seconds of grace: admitted Temporal runs not moved on since, oldest first. */
export const STALLED_TEMPORAL_RUNS = statement(
  'stalled_temporal_runs',
  `select id from runs
    where engine = 'temporal' and ${admittedRun()}
      and updated_at < clock_timestamp() - make_interval(secs => $1)
    order by updated_at, id limit 200`,
);

/** $1 run ids: what a run's workflow memo carries. */
export const TEMPORAL_RUN_MEMOS = statement(
  'temporal_run_memos',
  `select r.id, a.handle, r.workflow_id, r.version_id, w.name, r.trace_context
     from runs r join accounts a on a.id = r.account_id join workflows w on w.id = r.workflow_id
    where r.id = any($1::uuid[])`,
);

/** $1 the mark, $2 run ids: their workflows were started. */
export const MARK_TEMPORAL_STARTED = statement(
  'mark_temporal_started',
  `update runs set lease_owner = $1 where id = any($2::uuid[]) and lease_owner is null and ${liveRun()}`,
);
