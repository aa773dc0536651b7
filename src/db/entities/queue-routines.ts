import { Routine } from '@mikro-orm/core';
import {
  ADMIT_QUEUED_BODY,
  ADMIT_QUEUED_RETURNS,
  NUMBER_QUEUED_BODY,
  NUMBER_QUEUED_RETURNS,
} from '../migrations/Migration20261204000000AdmissionFunctions.ts';

/**
 * The queue's two lock-then-read steps as database functions, declared with the text of the migration
 * that created them (src/db/migrations/Migration20261204000000AdmissionFunctions.ts explains both), so the
 * schema diff holds the database to them.
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
  returns: { runtimeType: 'object', columnType: ADMIT_QUEUED_RETURNS },
  body: ADMIT_QUEUED_BODY,
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

export const queueRoutines = [AdmitQueuedRoutine, NumberQueuedRoutine];
