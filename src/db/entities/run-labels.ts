import { defineEntity, p, type InferEntity } from '@mikro-orm/core';

/**
 * One row per metadata pair of a run (docs/design/run-metadata.md#filters): its primary key is the
 * order of `GET /runs?metadata[KEY]=VALUE`, an account's runs with that pair newest first, so a filtered
 * page reads as few rows as an unfiltered one whatever the pair's share or spread. Written with the run
 * by the acceptance statement, from its row; never changed (metadata is fixed) and runs are never deleted.
 */
export const RunLabelSchema = defineEntity({
  name: 'RunLabel',
  tableName: 'run_labels',
  properties: {
    accountId: p.uuid().primary(),
    key: p.text().primary(),
    value: p.text().primary(),
    createdAt: p.datetime().primary(),
    /** No foreign key, as for the event log: the row is written from its run's, and runs are never deleted. */
    runId: p.uuid().primary(),
  },
});
export type RunLabel = InferEntity<typeof RunLabelSchema>;
