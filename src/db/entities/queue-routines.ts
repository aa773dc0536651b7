import { Routine } from '@mikro-orm/core';
import { FAIR_PLACE_BODY } from '../migrations/Migration20261208000000RunPriorityAndFairness.ts';
import { ADMIT_WAIT_BODY, ADMIT_WAIT_RETURNS } from '../migrations/Migration20261209040000AdmissionWait.ts';

/**
 * The queue's database functions, declared with the text of the migrations that created them (which
 * explain them), so the schema diff holds the database to them.
 */

/** `wr_admit_queued(...)`: one admission round (src/runs/admit-runs.ts). */
export const AdmitQueuedRoutine = new Routine({
  name: 'wr_admit_queued',
  type: 'function',
  language: 'plpgsql',
  deterministic: false,
  params: {
    round_capacity: { type: 'int' },
    round_engine: { type: 'text' },
    queue_window: { type: 'int' },
    lease_holder: { type: 'text' },
    lease_seconds: { type: 'float8' },
  },
  returns: { runtimeType: 'object', columnType: ADMIT_WAIT_RETURNS },
  body: ADMIT_WAIT_BODY,
});

/**
 * `wr_fair_place(run_priority, run_pass, run_queued_at, run_id)`: a queued run's place in the fair order
 * (src/sql/queue-places.ts); stable. Its plan settings (no sequential or bitmap scans, set by
 * Migration20261209030000DropQueueNumbering) are not expressible here: the migrations, not this
 * declaration, are what creates it.
 */
export const FairPlaceRoutine = new Routine({
  name: 'wr_fair_place',
  type: 'function',
  language: 'plpgsql',
  params: { run_priority: { type: 'smallint' }, run_pass: { type: 'bigint' }, run_queued_at: { type: 'timestamptz' }, run_id: { type: 'uuid' } },
  returns: { runtimeType: 'string', columnType: 'bigint' },
  body: FAIR_PLACE_BODY,
});

export const queueRoutines = [AdmitQueuedRoutine, FairPlaceRoutine];
