import { statement } from '../db/statement.ts';
import { RunSchema } from '../db/entities/index.ts';

/** Replaying runs (src/runs/replay-run.ts, docs/design/runs-in-sets.md#replay): table `runs`. */

/** $1 run ids, $2 account: what a replay takes of each of them the account owns (its password inputs are null: never kept). */
export const RUNS_TO_REPLAY = statement(
  'runs_to_replay',
  'select id, workflow_id, version_id, inputs, metadata from runs where id = any($1::uuid[]) and account_id = $2',
  [RunSchema],
);
