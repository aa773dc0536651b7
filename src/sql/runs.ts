import { statement } from '../db/statement.ts';
import { positionSql } from '../services/runs/queue-line.ts';
import { runEventsCte } from './run-events.ts';

/** Reading a run and making it terminal (table `runs`, with its `run_events` and `run_secrets`). */

/** The columns of a run the engines drive it by (src/runs/run-state.ts maps them). */
export const STATE_COLUMNS = `account_id, version_id, status, phase, suspend_reason, resume_at, credential_mode, inputs, progress,
  compute_usd, compute_limit_usd, step_usd, steps_executed, last_sequence`;

/** The columns of a run as the API shows it (src/services/runs/run-views.ts maps them). */
export const RUN_COLUMNS = `id, account_id, workflow_id, version_id, status, phase, reason, suspend_reason, outcome,
  billing_status, charge_usd, outputs, created_at, queued_at, started_at, completed_at, last_sequence`;

/** $1 run id; with the run's queue place, read in the same statement (src/services/runs/queue-line.ts). */
export const FIND_RUN = statement('find_run', `select ${RUN_COLUMNS}, ${positionSql('runs')} as queue_position from runs where id = $1`);

/** $1 run id, $2 account id: another account's run is as unknown as a missing one. */
export const FIND_ACCOUNT_RUN = statement(
  'find_account_run',
  `select ${RUN_COLUMNS}, ${positionSql('runs')} as queue_position from runs where id = $1 and account_id = $2`,
);

/** $1 run id: what finishing reads of the run, under its row lock. */
export const LOCK_RUN_TO_FINISH = statement(
  'lock_run_to_finish',
  `select r.account_id, r.status, r.funding, r.bundle_id, r.hold_usd, r.compute_usd, r.creator_price_usd, r.workflow_id,
          b.usd_per_run as bundle_usd_per_run
     from runs r left join bundles b on b.id = r.bundle_id
    where r.id = $1 for update of r`,
);

/**
 * The terminal state, its event and the deletion of the run's secrets in one statement. $1 run id,
 * $2 status, $3 outcome, $4 reason, $5 outputs (JSON or null: kept), $6 billing status, $7 charge,
 * $8 cap, $9–$11 the terminal event (one-element arrays: type, node id, JSON data; src/sql/run-events.ts).
 */
export const FINISH_RUN = statement(
  'finish_run',
  `with u as (
     update runs set status = $2, outcome = $3, reason = $4, outputs = coalesce($5::jsonb, outputs), billing_status = $6,
            charge_usd = $7, cap_usd = $8, phase = null, suspend_reason = null, resume_at = null,
            lease_owner = null, lease_until = null, completed_at = clock_timestamp(), updated_at = now(),
            last_sequence = last_sequence + cardinality($9::text[])
      where id = $1 returning ${RUN_COLUMNS}),
   ${runEventsCte('$9', '$10', '$11')},
   s as (delete from run_secrets where run_id = $1)
   select * from u`,
);
