import { Routine } from '@mikro-orm/core';
import { NUMBER_QUEUED_BODY, NUMBER_QUEUED_RETURNS } from '../migrations/Migration20261204000000AdmissionFunctions.ts';
import { QUEUE_PLACE_BODY } from '../migrations/Migration20261206000000QueuePlace.ts';
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

/** `wr_number_queued(batch_size)`: numbers the queue's unnumbered runs (src/runs/queue-line.ts). */
export const NumberQueuedRoutine = new Routine({
  name: 'wr_number_queued',
  type: 'function',
  language: 'plpgsql',
  deterministic: false,
  params: { batch_size: { type: 'int' } },
  returns: { runtimeType: 'object', columnType: NUMBER_QUEUED_RETURNS },
  body: NUMBER_QUEUED_BODY,
});

/**
 * `wr_queue_place(run_seq, run_queued_at, run_id)`: a queued run's place (src/sql/queue-line.ts). STABLE, set by
 * Migration20261208000000QueuePlaceStable: `deterministic` can say only immutable or volatile, so it is left unset.
 */
export const QueuePlaceRoutine = new Routine({
  name: 'wr_queue_place',
  type: 'function',
  language: 'plpgsql',
  params: { run_seq: { type: 'bigint' }, run_queued_at: { type: 'timestamptz' }, run_id: { type: 'uuid' } },
  returns: { runtimeType: 'string', columnType: 'bigint' },
  body: QUEUE_PLACE_BODY,
});

/** `wr_fair_place(run_priority, run_pass, run_queued_at, run_id)`: a queued run's place in the fair order (src/sql/queue-line.ts); stable. */
export const FairPlaceRoutine = new Routine({
  name: 'wr_fair_place',
  type: 'function',
  language: 'plpgsql',
  params: { run_priority: { type: 'smallint' }, run_pass: { type: 'bigint' }, run_queued_at: { type: 'timestamptz' }, run_id: { type: 'uuid' } },
  returns: { runtimeType: 'string', columnType: 'bigint' },
  body: FAIR_PLACE_BODY,
});

export const queueRoutines = [AdmitQueuedRoutine, NumberQueuedRoutine, QueuePlaceRoutine, FairPlaceRoutine];
