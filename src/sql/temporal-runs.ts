import { statement } from '../db/statement.ts';
import { AccountSchema, RunEventSchema, RunSchema, WorkflowSchema, WorkflowVersionSchema } from '../db/entities/index.ts';
import { admittedRun, IN_FLIGHT, liveRun, queuedRun, scheduledRun } from '../db/entities/run-predicates.ts';

/**
 * The Temporal engine's reads and marks on `runs` (src/engine/temporal/temporal-engine.ts): a run whose
 * workflow was started carries `lease_owner = 'temporal'` (a column the embedded engine uses for leases).
 */

/**
 * Whether the Temporal engine has periodic work: a Temporal run queued or in flight, or the next delayed
 * start of a Temporal run (src/engine/sweep-schedule.ts). Each probe is answered by the partial index of its
 * predicate (the queue's line, runs in flight, scheduled runs).
 */
export const TEMPORAL_RUNS_LIVE = statement(
  'temporal_runs_live',
  `select exists (select 1 from runs where ${queuedRun()} and engine = 'temporal')
       or exists (select 1 from runs where (${IN_FLIGHT}) and engine = 'temporal') as live,
     (select extract(epoch from min(scheduled_for)) * 1000 from runs where ${scheduledRun()} and engine = 'temporal')::float8 as next_start_ms`,
  [RunSchema],
);

/**
 * $1 seconds of grace: non-terminal Temporal runs whose workflow start was never marked, oldest first; a
 * run waiting for its delayed start has no workflow yet (src/runs/scheduled-runs.ts).
 */
export const UNSTARTED_TEMPORAL_RUNS = statement(
  'unstarted_temporal_runs',
  `select id, phase from runs
    where engine = 'temporal' and ${liveRun()} and lease_owner is null and phase is distinct from 'scheduled'
      and created_at < clock_timestamp() - make_interval(secs => $1)
    order by created_at, id limit 200`,
  [RunSchema],
);

/** $1 seconds of grace: admitted Temporal runs not moved on since, oldest first. */
export const STALLED_TEMPORAL_RUNS = statement(
  'stalled_temporal_runs',
  `select id from runs
    where engine = 'temporal' and ${admittedRun()}
      and updated_at < clock_timestamp() - make_interval(secs => $1)
    order by updated_at, id limit 200`,
  [RunSchema],
);

/**
 * $1 run ids: what a run's workflow memo carries, with its phase, whether its workflow was started, its
 * deadline (epoch ms), its priority class and concurrency key.
 */
export const TEMPORAL_RUN_MEMOS = statement(
  'temporal_run_memos',
  `select r.id, a.handle, r.workflow_id, r.version_id, w.name, v.label, r.trace_context, r.phase, r.lease_owner,
          (extract(epoch from r.deadline) * 1000)::float8 as deadline_ms, r.priority, r.concurrency_key
     from runs r join accounts a on a.id = r.account_id join workflows w on w.id = r.workflow_id
     join workflow_versions v on v.id = r.version_id
    where r.id = any($1::uuid[])`,
  [RunSchema, AccountSchema, WorkflowSchema, WorkflowVersionSchema],
);

/** $1 the mark, $2 run ids: their workflows were started. */
export const MARK_TEMPORAL_STARTED = statement(
  'mark_temporal_started',
  `update runs set lease_owner = $1 where id = any($2::uuid[]) and lease_owner is null and ${liveRun()}`,
  [RunSchema],
);

/** $1 run ids: those of them still in flight (not terminal) on the Temporal engine. */
export const OPEN_TEMPORAL_RUNS = statement(
  'open_temporal_runs',
  `select id from runs where id = any($1::uuid[]) and engine = 'temporal' and status in ('pending', 'running', 'suspended')`,
  [RunSchema],
);

/**
 * $1 seconds of grace: Temporal runs resumed from a credentials wait (their last event is run.resumed)
 * that have not moved since: their workflow may have missed the `credentialsSupplied` signal.
 */
export const UNHEARD_RESUMES = statement(
  'unheard_temporal_resumes',
  `select r.id from runs r join run_events e on e.run_id = r.id and e.sequence = r.last_sequence
    where r.engine = 'temporal' and r.status = 'running' and e.type = 'run.resumed'
      and r.updated_at < clock_timestamp() - make_interval(secs => $1)
    order by r.updated_at, r.id limit 200`,
  [RunSchema, RunEventSchema],
);
