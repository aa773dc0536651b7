import { statement } from '../db/statement.ts';
import { RUN_COLUMNS } from './runs.ts';
import { BATCH_EVENTS } from './run-events.ts';

/**
 * The internal GraphQL's (cross-account) reads of runs and their events (src/graphql/queries/runs.ts):
 * the REST run columns (src/sql/runs.ts) plus the account's handle. Batches take their ids as one array.
 */

const COLUMNS = RUN_COLUMNS.split(',')
  .map((c) => `r.${c.trim()}`)
  .join(', ');
const SELECT = `select ${COLUMNS}, a.handle as account_handle from runs r join accounts a on a.id = r.account_id`;

/** $1 run ids. */
export const GRAPHQL_RUNS_BY_IDS = statement('graphql_runs_by_ids', `${SELECT} where r.id = any($1::uuid[])`);

/**
 * Runs of every account, newest first (created_at desc, then id); each filter applies when given (null:
 * any). $1 account handle, $2 status, $3 workflow id, $4 created at or after, $5 created before, $6 limit,
 * $7 offset.
 */
export const GRAPHQL_SEARCH_RUNS = statement(
  'graphql_search_runs',
  `${SELECT}
    where ($1::text is null or a.handle = $1::text)
      and ($2::text is null or r.status = $2::text)
      and ($3::uuid is null or r.workflow_id = $3::uuid)
      and ($4::timestamptz is null or r.created_at >= $4::timestamptz)
      and ($5::timestamptz is null or r.created_at < $5::timestamptz)
    order by r.created_at desc, r.id desc limit $6::bigint offset $7::bigint`,
);

/** Up to $3 events per run after sequence $2 (a cursor), in order: $1 run ids. */
export const GRAPHQL_EVENT_PAGES = statement(
  'graphql_event_pages',
  `select run_id, type, sequence, ts, node_id, data from (
     select b.run_id, e.type, s.sequence, b.ts, e.node_id, e.data,
            row_number() over (partition by b.run_id order by s.sequence) as rn
       from run_event_batches b
      ${BATCH_EVENTS}
      where b.run_id = any($1::uuid[]) and b.last_sequence > $2::bigint and s.sequence > $2::bigint
   ) x where rn <= $3::bigint order by run_id, sequence`,
);
