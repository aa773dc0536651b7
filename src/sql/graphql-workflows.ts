import { statement } from '../db/statement.ts';
import { RUNS_COUNT_SQL } from './workflows.ts';

/**
 * The internal GraphQL's reads of workflows and versions (src/graphql/queries/workflows.ts): the
 * catalog's facts, not a caller's view. Batches take their ids as one array.
 */

const SELECT = `select w.id, w.name, w.description, w.service_code, w.owner_id, o.handle as owner_handle, w.run_model,
       w.price_usd, w.listing, w.unlock, w.api_access, w.credential_mode, w.compute_limit_usd,
       w.active_version_id, ${RUNS_COUNT_SQL} as runs_count, w.created_at
  from workflows w join accounts o on o.id = w.owner_id`;

/** $1 workflow ids. */
export const GRAPHQL_WORKFLOWS_BY_IDS = statement('graphql_workflows_by_ids', `${SELECT} where w.id = any($1::uuid[])`);

/**
 * Every workflow (any listing), ordered by name then id like the REST list; each filter applies when
 * given (null: any). $1 owner handle, $2 listing, $3 `ilike` pattern on name or description, $4 limit,
 * $5 offset.
 */
export const GRAPHQL_SEARCH_WORKFLOWS = statement(
  'graphql_search_workflows',
  `${SELECT}
    where ($1::text is null or o.handle = $1::text)
      and ($2::text is null or w.listing = $2::text)
      and ($3::text is null or w.name ilike $3::text or coalesce(w.description, '') ilike $3::text)
    order by w.name asc, w.id asc limit $4::bigint offset $5::bigint`,
);

const VERSION_COLUMNS = `v.id, v.workflow_id, v.label, v.graph, v.created_at, (w.active_version_id = v.id) as is_active`;

/** $1 version ids. */
export const GRAPHQL_VERSIONS_BY_IDS = statement(
  'graphql_versions_by_ids',
  `select ${VERSION_COLUMNS} from workflow_versions v join workflows w on w.id = v.workflow_id where v.id = any($1::uuid[])`,
);

/** A page of versions per workflow, newest first: $1 workflow ids, $2 offset, $3 limit. */
export const GRAPHQL_VERSION_PAGES = statement(
  'graphql_version_pages',
  `select * from (
     select ${VERSION_COLUMNS},
            row_number() over (partition by v.workflow_id order by v.created_at desc, v.id desc) as rn
       from workflow_versions v join workflows w on w.id = v.workflow_id
      where v.workflow_id = any($1::uuid[])
   ) x where rn > $2::bigint and rn <= $2::bigint + $3::bigint order by workflow_id, rn`,
);
