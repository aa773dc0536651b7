import { statement } from '../db/statement.ts';
import { BundleSchema, IdempotencyRecordSchema, RunSchema } from '../db/entities/index.ts';

/**
 * The spend-cap check of the acceptance (wr_spend_cap_refusals, src/sql/accept-runs.ts) on its own, for
 * a dry run: the ords of the calls that would not fit. It writes nothing; the keys' rows it locks are let
 * go when it commits. $1 ords, $2 API key ids, $3 window starts, $4 prices, $5 caps, $6 accounts, $7 idempotency keys.
 */
export const SPEND_CAP_PREVIEW = statement(
  'spend_cap_preview',
  `select wr_spend_cap_refusals($1::bigint[], $2::uuid[], $3::timestamptz[], $4::numeric[], $5::numeric[], $6::uuid[], $7::text[]) as ords`,
  [RunSchema, IdempotencyRecordSchema],
);

/** $1 account id: the runs left in its bundles, by workflow and version (a bundle funds a run of its own version). */
export const BUNDLE_RUNS_LEFT = statement(
  'bundle_runs_left',
  `select workflow_id, version_id, sum(runs_left)::int as runs_left from bundles where account_id = $1::uuid and runs_left > 0
    group by workflow_id, version_id`,
  [BundleSchema],
);
