import { statement, type Statement } from '../db/statement.ts';
import {
  AccountSchema,
  ApiKeyRateWindowSchema,
  IdempotencyRecordSchema,
  PurchaseSchema,
  RunEventBatchSchema,
  RunSchema,
  RunSecretSchema,
  WorkflowSchema,
  WorkflowVersionSchema,
} from '../db/entities/index.ts';
import { inFlightRun, queuedRun } from './run-predicates.ts';
import { CLAIM_ON_CONFLICT, IDEMPOTENCY_RECORD_HOURS } from './idempotency-records.ts';
import { STATE_COLUMNS } from './runs.ts';
import { GATE_CTE } from './queue-line.ts';
import { rateHitCte } from './rate-windows.ts';
import { viewTokenOf } from './workflows.ts';

/** A variant without the hit answers its columns as nulls. */
const NO_HIT = 'null::boolean as allowed, null::int as counted, null::float8 as oldest_ms, null::float8 as now_ms';

/**
 * POST /runs as ONE statement (docs/design/rules.md#idempotency, money.md#spend-caps): the
 * idempotency record, the spend-cap reservation, the run, its `run.queued` event and its sealed password
 * inputs; and, when it is still to be counted, the request's count in its key's rate window.
 *
 * - `hit`: with a limit ($24), counts the request in its key's window (`rateHitCte`,
 *   src/sql/rate-windows.ts) and nothing is written unless it was allowed. The window row stays locked
 *   until the commit: the service commits acceptances in groups (src/db/group-commit.ts), one group of
 *   acceptances of a process in flight at a time, so one key's acceptances are counted a group per commit, not one per
 *   commit. Without $24 the request was counted before: by the workflow read (FIND_WORKFLOW_TO_RUN in
 *   src/sql/workflows.ts) or, on PGlite, in memory (docs/design/rules.md#rate-limit).
 * - `ok`: whether anything may be written. `allowed`: the hit allowed the request. `current`: the
 *   workflow as the caller ($2) sees it now still has the view token $23 of the read the request was
 *   checked against (src/sql/workflows.ts); null $23 fences nothing. Otherwise nothing is written and
 *   the statement says why (the hit's `allowed` false, or `stale`).
 * - `claim`: with a key ($14), `insert … on conflict` on (account, key) decides replay vs new. A
 *   concurrent request with the same key waits on the conflicting insert until it commits, then updates
 *   that row, which returns it: its `run_id` is this run's ($1) when the key was new or its record had
 *   expired (then replaced), else the run to replay — or a 409 when its fingerprint differs ($15).
 *   Lock order: the record, then the cap's row.
 * - `reserve`: only for a new run and a key with a cap ($18): `wr_reserve_spend_cap` locks the key's row
 *   and raises WR002 when the window's reservations ($17 onwards) plus this price ($6) exceed the cap, so
 *   nothing of the statement is written (the claimed record included).
 * - `gate`: the queue's numbering gate, held shared until the commit (src/services/runs/queue-line.ts).
 * - `adm`: whether the run is admitted by its acceptance (`now`: inserted in phase `starting`, with the
 *   engine's lease, `lease_owner`) instead of queued. Only when the group's first statement took the admission lock and said how
 *   to admit (TRY_LOCK_ADMISSION_FOR_ACCEPTANCES, src/sql/admit-queued.ts: the embedded engine's
 *   acceptances on a Postgres server), for this run's engine, with no run of it queued (the line keeps
 *   its order: a queued run is admitted first, by the round after the acceptances) and room both under
 *   RUN_CAPACITY and under the account's max_concurrent_runs, as an admission round would decide. Each
 *   acceptance's snapshot follows the lock and the group's earlier acceptances, so it counts them.
 *   Materialized: `r` reads `now` three times, and an inlined `adm` would count the runs three times;
 *   `d` is kept apart (`offset 0`) for the same reason, as `adm` reads its `now` twice.
 * - `r`, `s`, `e`: the run, its sealed inputs (arrays $19–$21) and `run.queued`, only for a new run.
 *
 * $1 run id, $2 account, $3 API key, $4 workflow, $5 version, $6 displayed price (also the cap
 * reservation), $7 user access, $8 creator price, $9 step price, $10 compute limit, $11 credential
 * mode, $12 public inputs (JSON), $13 engine, $14 idempotency key or null, $15 fingerprint, $16 record
 * id (time-ordered, src/sql/idempotency-records.ts), $17 cap window start, $18 cap or null, $19 secret
 * ids, $20 secret names, $21 ciphertexts, $22 the request's trace context or null (docs/tracing.md),
 * $23 the workflow read's view token or null, $24 the key's limit per minute when the request is
 * counted here, else null. Returns the hit's columns (HitRow; null when not counted here) and, for a
 * run admitted here, `admitted_id` and its state columns (STATE_COLUMNS, as an admission round
 * returns them).
 */

function acceptText(o: { hit: boolean; cap: boolean; secrets: boolean }): string {
  const uncapped = o.cap ? '' : `\nuncapped as (select $17::timestamptz, $18::numeric),`;
  const unsealed = o.secrets ? '' : `\nunsealed as (select $19::uuid[], $20::text[], $21::text[]),`;
  return `with ${GATE_CTE},
${o.hit ? rateHitCte('$3', '$24') : 'unhit as (select $24::int)'},${uncapped}${unsealed}
ok as (
  select ${o.hit ? 'coalesce((select allowed from hit), true)' : 'true'} as allowed,
         ($23::text is null or ${viewTokenOf('$2', '$4')} is not distinct from $23::text) as current),
claim as (
  insert into idempotency_records (id, account_id, key, fingerprint, run_id, created_at, expires_at)
  select $16::uuid, $2::uuid, $14::varchar, $15::varchar, $1::uuid, now(), now() + interval '${IDEMPOTENCY_RECORD_HOURS} hours'
   where $14::varchar is not null and (select allowed and current from ok)
  ${CLAIM_ON_CONFLICT}
  returning run_id, fingerprint),
fresh as (
  select 1 as one where (select allowed and current from ok)
     and ($14::varchar is null or exists (select 1 from claim where run_id = $1::uuid))),
adm as materialized (
  select d.now, case when d.now then nullif(current_setting('wr.admit_lease_owner', true), '') end as lease_owner
    from (select case when current_setting('wr.admission', true) = 'true' and current_setting('wr.admit_engine', true) = $13::text
      then not exists (select 1 from runs q where ${queuedRun('q')} and q.engine = $13::text)
       and (select count(*) from runs i where ${inFlightRun('i')}) < current_setting('wr.admit_capacity', true)::int
       and (select a.max_concurrent_runs is null or (select count(*) from runs i where i.account_id = $2::uuid and ${inFlightRun('i')}) < a.max_concurrent_runs
              from accounts a where a.id = $2::uuid)
      else false end as now offset 0) d),
${!o.cap ? '' : `reserve as (select wr_reserve_spend_cap($3::uuid, $17::timestamptz, $6::numeric, $18::numeric) as ok
                from fresh where $18::numeric is not null),
`}r as (
  insert into runs (id, account_id, api_key_id, workflow_id, version_id, status, phase, billing_status,
                    cap_usd, user_access, displayed_price_usd, creator_price_usd, step_usd, compute_limit_usd,
                    credential_mode, inputs, progress, outputs, engine, last_sequence, created_at, queued_at, updated_at, trace_context,
                    lease_owner, lease_until)
  select $1::uuid, $2::uuid, $3::uuid, $4::uuid, $5::uuid, 'pending', case when adm.now then 'starting' else 'queued' end, 'pending',
         $6::numeric, $7::text, $6::numeric,
         $8::numeric, $9::numeric, $10::numeric, $11::text, $12::jsonb,
         '{"results":{},"timers":{}}'::jsonb, '[]'::jsonb, $13::varchar, 1, clock_timestamp(), clock_timestamp(), clock_timestamp(), $22::jsonb,
         adm.lease_owner,
         case when adm.lease_owner is not null then clock_timestamp() + make_interval(secs => current_setting('wr.admit_lease_secs', true)::float8) end
    from fresh, adm${!o.cap ? '' : ' where (select count(*) from reserve) = (case when $18::numeric is null then 0 else 1 end)'}
  returning id, created_at, ${STATE_COLUMNS}),
${!o.secrets ? '' : `s as (
  insert into run_secrets (id, run_id, kind, name, ciphertext, created_at)
  select u.id, r.id, 'password_input', u.name, u.ciphertext, now()
    from r, unnest($19::uuid[], $20::text[], $21::text[]) as u(id, name, ciphertext)),
`}e as (
  insert into run_event_batches (run_id, last_sequence, types, node_ids, data, ts)
  select r.id, 1, array['run.queued'], array[null]::text[], array['{"status":"pending"}'::jsonb], r.created_at from r cross join gate)
select (select run_id from claim) as run_id, (select fingerprint from claim) as fingerprint, exists (select 1 from r) as inserted,
       not ok.current as stale, ${o.hit ? 'hit.allowed, hit.counted, hit.oldest_ms, hit.now_ms' : NO_HIT}, a.*
  from ok${o.hit ? ' left join hit on true' : ''}
  left join (select id as admitted_id, ${STATE_COLUMNS} from r where phase = 'starting') a on true`;
}

/**
 * ACCEPT_RUN and its variants without the parts a request does not need: the rate count ($24 null),
 * the cap's reservation ($18 null), the sealed inputs ($19 empty). Each part a plan holds costs its
 * start-up on every execution, run or not. Same parameters, same columns, same answers; one group
 * commit kind (`accept_run`). A variant without a part still types that part's parameters (Postgres
 * prepares no statement with an untyped one) in a CTE nothing reads, which the planner drops. Index:
 * 4 × hit + 2 × cap + secrets.
 */
const ACCEPT_RUN_ENTITIES = [
  ApiKeyRateWindowSchema,
  WorkflowSchema,
  AccountSchema,
  PurchaseSchema,
  WorkflowVersionSchema,
  IdempotencyRecordSchema,
  RunSchema,
  RunSecretSchema,
  RunEventBatchSchema,
];
export const ACCEPT_RUN_VARIANTS: readonly Statement[] = [
  'accept_run_plain',
  'accept_run_with_secrets',
  'accept_run_with_cap',
  'accept_run_with_cap_secrets',
  'accept_run_with_hit',
  'accept_run_with_hit_secrets',
  'accept_run_with_hit_cap',
  'accept_run',
].map((name, i) => statement(name, acceptText({ hit: (i & 4) > 0, cap: (i & 2) > 0, secrets: (i & 1) > 0 }), ACCEPT_RUN_ENTITIES, 'accept_run'));

export const ACCEPT_RUN = ACCEPT_RUN_VARIANTS[7]!;

/** The variant for a request: `hit` counted here, `cap` reserved, `secrets` sealed inputs to insert. */
export const acceptRunFor = (o: { hit: boolean; cap: boolean; secrets: boolean }): Statement =>
  ACCEPT_RUN_VARIANTS[(o.hit ? 4 : 0) + (o.cap ? 2 : 0) + (o.secrets ? 1 : 0)]!;
