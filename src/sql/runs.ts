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

/** The list's time range on table or alias `t`: $6, $7 created at or after, before (or null: unbounded), as a range of an index. */
const createdWithin = (t: string) => `${t}.created_at >= coalesce($6::timestamptz, '-infinity') and ${t}.created_at < coalesce($7::timestamptz, 'infinity')`;

/** The list's other filters on alias `r`: $2 statuses or null (any), $3 workflow or null (any). */
const statusAndWorkflow = (r: string) => `($2::text[] is null or ${r}.status = any($2::text[])) and ($3::uuid is null or ${r}.workflow_id = $3::uuid)`;

/** The list item's columns (RUN_COLUMNS without outputs, which a list item has none of) of alias `r`. */
const listColumns = (r: string) => runColumnsOf(r).replace(`${r}.outputs, `, '');

/**
 * An account's runs, newest first (src/runs/list-runs.ts): $1 account, $4 limit, $5 offset, the filters of
 * createdWithin (a range of runs_account_created_idx) and statusAndWorkflow.
 */
export const LIST_RUNS = statement(
  'list_runs',
  `select ${listColumns('r')} from runs r
    where r.account_id = $1 and ${createdWithin('r')} and ${statusAndWorkflow('r')}
    order by r.created_at desc, r.id desc limit $4 offset $5`,
  [RunSchema],
);

/**
 * LIST_RUNS of the runs whose metadata holds every pair of $10 (JSON), walking the account's runs with
 * the pair $8 = $9 (one of them) in `run_labels`' order, which is the list's: a page reads as many
 * rows as an unfiltered one (docs/design/run-metadata.md#filters).
 */
export const LIST_RUNS_BY_LABEL = statement(
  'list_runs_by_label',
  `select ${listColumns('r')} from run_labels label join runs r on r.id = label.run_id
    where label.account_id = $1 and label.key = $8 and label.value = $9
      and ${createdWithin('label')} and r.metadata @> $10::jsonb and ${statusAndWorkflow('r')}
    order by label.created_at desc, label.run_id desc limit $4 offset $5`,
  [RunSchema, RunLabelSchema],
);

/**
 * LIST_RUNS of the runs started with one concurrency key, walking runs_concurrency_key_created_idx in the
 * list's order: $8 is JSON `{ "concurrencyKey", "metadata" }`, the key and the pairs the metadata must hold
 * (`{}`: any).
 */
export const LIST_RUNS_BY_CONCURRENCY_KEY = statement(
  'list_runs_by_concurrency_key',
  `select ${listColumns('r')} from runs r
    where r.account_id = $1 and r.concurrency_key is not null and r.concurrency_key = $8::jsonb->>'concurrencyKey'
      and ${createdWithin('r')} and r.metadata @> ($8::jsonb->'metadata') and ${statusAndWorkflow('r')}
    order by r.created_at desc, r.id desc limit $4 offset $5`,
  [RunSchema],
);

/** A run's creation instant as text to the microsecond (UTC), the keyset of a filter's walk (src/runs/run-selection.ts). */
const createdKey = (t: string) => `to_char(${t}.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as created_key`;

/** Past the keyset ($5 created_at, $8 id: where the last call of a walk ended, or null: from the newest) on alias `t`'s `created_at`, `id`. */
const pastKeyset = (t: string, id: string) => `($5::timestamptz is null or (${t}.created_at, ${id}) < ($5::timestamptz, $8::uuid))`;

/**
 * The runs a bulk call's filter matches (src/runs/run-selection.ts), in the list's order, from a keyset
 * on: LIST_RUNS's filters ($1 account, $2 statuses, $3 workflow, $6, $7 the time range), $4 at most,
 * $5 and $8 the keyset (pastKeyset). Each run's id, status and created_key.
 */
export const MATCH_RUNS = statement(
  'match_runs',
  `select r.id, r.status, ${createdKey('r')} from runs r
    where r.account_id = $1 and ${createdWithin('r')} and ${statusAndWorkflow('r')} and ${pastKeyset('r', 'r.id')}
    order by r.created_at desc, r.id desc limit $4`,
  [RunSchema],
);

/** MATCH_RUNS of the runs whose metadata holds every pair of $11 (JSON), walking `run_labels` by the pair $9 = $10 as LIST_RUNS_BY_LABEL does. */
export const MATCH_RUNS_BY_LABEL = statement(
  'match_runs_by_label',
  `select r.id, r.status, ${createdKey('r')} from run_labels label join runs r on r.id = label.run_id
    where label.account_id = $1 and label.key = $9 and label.value = $10
      and ${createdWithin('label')} and r.metadata @> $11::jsonb and ${statusAndWorkflow('r')} and ${pastKeyset('label', 'label.run_id')}
    order by label.created_at desc, label.run_id desc limit $4`,
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
