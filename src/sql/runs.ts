import { statement } from '../db/statement.ts';
import { RunLabelSchema, RunSchema } from '../db/entities/index.ts';
import { positionSql } from './queue-places.ts';
import { liveRun } from '../db/entities/run-predicates.ts';

/** Reading a run and making it terminal (table `runs`, with its events (`run_event_batches`) and `run_secrets`). */

/** The columns of a run the engines drive it by (src/runs/run-state.ts maps them). */
export const STATE_COLUMNS = `account_id, version_id, status, phase, suspend_reason, resume_at, credential_mode, inputs, progress,
  compute_usd, compute_limit_usd, step_usd, steps_executed, last_sequence`;

/** The columns of a run as the API shows it (src/runs/run-views.ts maps them). */
export const RUN_COLUMNS = `id, account_id, workflow_id, version_id, status, phase, reason, suspend_reason, outcome,
  billing_status, charge_usd, outputs, created_at, queued_at, started_at, completed_at, last_sequence, metadata, deadline, replay_of, scheduled_for,
  priority, concurrency_key`;

/** RUN_COLUMNS of the table or alias `r` (a statement that reads the run beside other tables). */
export const runColumnsOf = (r: string): string => RUN_COLUMNS.replace(/(\w+)/g, `${r}.$1`);

/** $1 run id; with the run's queue place, read in the same statement (src/sql/queue-places.ts). */
export const FIND_RUN = statement('find_run', `select ${RUN_COLUMNS}, ${positionSql('runs')} as queue_position from runs where id = $1`, [RunSchema]);

/** $1 run id, $2 account id: another account's run is as unknown as a missing one. */
export const FIND_ACCOUNT_RUN = statement(
  'find_account_run',
  `select ${RUN_COLUMNS}, ${positionSql('runs')} as queue_position from runs where id = $1 and account_id = $2`,
  [RunSchema],
);

/** $1 run id: the run's state as the engines drive it (src/runs/run-state.ts). */
/** $1 run id: the state columns, and the buyer-safe reason of a failed run (what its Temporal workflow fails with). */
export const RUN_STATE = statement('run_state', `select ${STATE_COLUMNS}, reason, outcome from runs where id = $1`, [RunSchema]);

/** $1 run id: what never changes of a run (cached by src/runs/run-state.ts). */
export const RUN_META = statement('run_meta', 'select version_id, account_id from runs where id = $1', [RunSchema]);

/** The columns of readRun (src/runs/run-state.ts), with whether one more step keeps the run within its compute limit. */
const READ_COLUMNS = `status, progress, inputs, credential_mode, version_id, account_id,
  wr_within_compute_limit(compute_usd, 1, step_usd, compute_limit_usd) as next_step_fits`;

/** $1 run id: what a step's recording reads of the run. */
export const READ_RUN = statement('read_run', `select ${READ_COLUMNS} from runs where id = $1`, [RunSchema]);

/** $1 run id: READ_RUN under the run's row lock. */
export const READ_RUN_FOR_UPDATE = statement('read_run_for_update', `select ${READ_COLUMNS} from runs where id = $1 for update`, [RunSchema]);

/** $1 run id: its status and the sequence of its newest event. */
export const RUN_STATUS = statement('run_status', 'select status, last_sequence from runs where id = $1', [RunSchema]);

/** $1 run id: what the Temporal workflow asks of its run (src/engine/temporal/activities.ts). */
export const RUN_SCHEDULE = statement(
  'run_schedule',
  'select status, phase, reason, outcome, suspend_reason, (extract(epoch from resume_at) * 1000)::float8 as resume_ms from runs where id = $1',
  [RunSchema],
);

/**
 * The call of the list and match statements below: their one parameter ($1, JSON) with named fields.
 * Each statement reads it as `call`, one row; a field is read through `arg`, a scalar subquery the
 * planner runs once before the scan (an InitPlan) and then uses as a parameter, so the account, the
 * pair and the time range still bound the index scan and the index still gives the order (joining
 * `call` would put its row first and need a sort).
 */
export interface RunListCall {
  account_id: string;
  /** Statuses, or null: any. */
  statuses: readonly string[] | null;
  /** A workflow id, or null: any. */
  workflow_id: string | null;
  /** Created at or after, before (UTC instants as Postgres reads them), or null: unbounded. */
  created_after: string | null;
  created_before: string | null;
  /** At most this many rows, after the first `skip_rows` (the lists). */
  max_rows: number;
  skip_rows?: number;
  /** The pairs the run's metadata must hold (`{}`: any), and the one of them the *_BY_LABEL statements walk `run_labels` by. */
  metadata?: Readonly<Record<string, string>>;
  label_key?: string;
  label_value?: string;
  /** The concurrency key of LIST_RUNS_BY_CONCURRENCY_KEY. */
  concurrency_key?: string;
  /** Where the last call of a match's walk ended (its last run's creation instant and id), or null: from the newest. */
  past_created?: string | null;
  past_id?: string | null;
}

/** The pair a *_BY_LABEL statement walks `run_labels` by: the first of `metadata`'s, or undefined when it has none. */
export function labelOf(metadata: Readonly<Record<string, string>>): Pick<RunListCall, 'label_key' | 'label_value'> | undefined {
  const [label] = Object.entries(metadata).map(([key, value]) => ({ label_key: key, label_value: value }));
  return label;
}

const LIST_CALL = `call as materialized (
  select * from jsonb_to_record($1::jsonb)
         as call(account_id uuid, statuses text[], workflow_id uuid, created_after timestamptz, created_before timestamptz, max_rows int, skip_rows bigint,
                 metadata jsonb, label_key text, label_value text, concurrency_key text, past_created timestamptz, past_id uuid))`;

/** A field of `call`, as a value computed once before the scan. */
const arg = (field: keyof RunListCall) => `(select ${field} from call)`;

/** The list's time range on table or alias `t`, as a range of an index. */
const createdWithin = (t: string) =>
  `${t}.created_at >= coalesce(${arg('created_after')}, '-infinity') and ${t}.created_at < coalesce(${arg('created_before')}, 'infinity')`;

/**
 * The list's other filters on alias `r`: the statuses (cast: `any` of a bare subquery would compare
 * with each of its rows) and the workflow.
 */
const statusAndWorkflow = (r: string) =>
  `(${arg('statuses')} is null or ${r}.status = any(${arg('statuses')}::text[]))
   and (${arg('workflow_id')} is null or ${r}.workflow_id = ${arg('workflow_id')})`;

/** The list item's columns (RUN_COLUMNS without outputs, which a list item has none of) of alias `r`. */
const listColumns = (r: string) => runColumnsOf(r).replace(`${r}.outputs, `, '');

/** The pair a *_BY_LABEL statement walks `run_labels` (alias `label`) by, and every pair the run's (alias `r`) metadata must hold. */
const labelled = `label.account_id = ${arg('account_id')} and label.key = ${arg('label_key')} and label.value = ${arg('label_value')}
      and ${createdWithin('label')} and r.metadata @> ${arg('metadata')} and ${statusAndWorkflow('r')}`;

/** A page of a list. */
const PAGE = `limit ${arg('max_rows')} offset ${arg('skip_rows')}`;

/**
 * An account's runs, newest first (src/runs/list-runs.ts): a RunListCall's account, time range (a
 * range of runs_account_created_idx), statuses, workflow and page.
 */
export const LIST_RUNS = statement(
  'list_runs',
  `with ${LIST_CALL}
  select ${listColumns('r')} from runs r
    where r.account_id = ${arg('account_id')} and ${createdWithin('r')} and ${statusAndWorkflow('r')}
    order by r.created_at desc, r.id desc ${PAGE}`,
  [RunSchema],
);

/**
 * LIST_RUNS of the runs whose metadata holds every pair of the call's `metadata`, walking the account's
 * runs with the pair `label_key` = `label_value` (one of them) in `run_labels`' order, which is the list's:
 * a page reads as many rows as an unfiltered one (docs/design/run-metadata.md#filters).
 */
export const LIST_RUNS_BY_LABEL = statement(
  'list_runs_by_label',
  `with ${LIST_CALL}
  select ${listColumns('r')} from run_labels label join runs r on r.id = label.run_id
    where ${labelled}
    order by label.created_at desc, label.run_id desc ${PAGE}`,
  [RunSchema, RunLabelSchema],
);

/**
 * LIST_RUNS of the runs started with the call's `concurrency_key` whose metadata holds every pair of its
 * `metadata` (`{}`: any), walking runs_concurrency_key_created_idx in the list's order.
 */
export const LIST_RUNS_BY_CONCURRENCY_KEY = statement(
  'list_runs_by_concurrency_key',
  `with ${LIST_CALL}
  select ${listColumns('r')} from runs r
    where r.account_id = ${arg('account_id')} and r.concurrency_key is not null and r.concurrency_key = ${arg('concurrency_key')}
      and ${createdWithin('r')} and r.metadata @> ${arg('metadata')} and ${statusAndWorkflow('r')}
    order by r.created_at desc, r.id desc ${PAGE}`,
  [RunSchema],
);

/** A run's creation instant as text to the microsecond (UTC), the keyset of a filter's walk (src/runs/run-selection.ts). */
const createdKey = (t: string) => `to_char(${t}.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as created_key`;

/** Past the call's keyset (`past_created`, `past_id`; null: from the newest) on alias `t`'s `created_at` and the run id `id`. */
const pastKeyset = (t: string, id: string) => `(${arg('past_created')} is null or (${t}.created_at, ${id}) < (${arg('past_created')}, ${arg('past_id')}))`;

/**
 * The runs a bulk call's filter matches (src/runs/run-selection.ts), in the list's order, from a keyset
 * on: LIST_RUNS's filters, at most `max_rows`, past the keyset (pastKeyset). Each run's id, status and created_key.
 */
export const MATCH_RUNS = statement(
  'match_runs',
  `with ${LIST_CALL}
  select r.id, r.status, ${createdKey('r')} from runs r
    where r.account_id = ${arg('account_id')} and ${createdWithin('r')} and ${statusAndWorkflow('r')} and ${pastKeyset('r', 'r.id')}
    order by r.created_at desc, r.id desc limit ${arg('max_rows')}`,
  [RunSchema],
);

/** MATCH_RUNS of the runs whose metadata holds every pair of the call's `metadata`, walking `run_labels` as LIST_RUNS_BY_LABEL does. */
export const MATCH_RUNS_BY_LABEL = statement(
  'match_runs_by_label',
  `with ${LIST_CALL}
  select r.id, r.status, ${createdKey('r')} from run_labels label join runs r on r.id = label.run_id
    where ${labelled} and ${pastKeyset('label', 'label.run_id')}
    order by label.created_at desc, label.run_id desc limit ${arg('max_rows')}`,
  [RunSchema, RunLabelSchema],
);

/** $1 run ids, $2 account: the status of each of them the account owns (another account's run is as unknown as a missing one). */
export const ACCOUNT_RUN_STATUSES = statement('account_run_statuses', 'select id, status from runs where id = any($1::uuid[]) and account_id = $2', [
  RunSchema,
]);

/**
 * Runs past their Cancel-After deadline (runs_deadline_idx), most overdue first: $1 engine, $2 a lease
 * owner to leave out (the Temporal engine's started mark: a started workflow keeps its own deadline
 * timer) or null, $3 how many at most.
 */
export const OVERDUE_RUNS = statement(
  'overdue_runs',
  `select id from runs
    where deadline is not null and ${liveRun()} and deadline <= now() and engine = $1 and ($2::text is null or lease_owner is distinct from $2)
    order by deadline limit $3`,
  [RunSchema],
);

/** The mean duration in seconds of the 50 runs completed last (the queue's ETA). */
export const RECENT_RUN_MEAN = statement(
  'recent_run_mean',
  `select avg(extract(epoch from completed_at - started_at))::float8 as mean from (
     select started_at, completed_at from runs
      where completed_at is not null and started_at is not null
      order by completed_at desc limit 50) recent`,
  [RunSchema],
);

/** $1 run id: the run's status and account, under its row lock (ordered with finish_runs, which deletes its secrets). */
export const LOCK_RUN_TO_SUPPLY = statement('lock_run_to_supply', 'select status, account_id from runs where id = $1 for update', [RunSchema]);
