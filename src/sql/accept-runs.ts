import { statement } from '../db/statement.ts';
import {
  AccountSchema,
  ApiKeyRateWindowSchema,
  IdempotencyRecordSchema,
  PurchaseSchema,
  RunEventBatchSchema,
  RunLabelSchema,
  RunSchema,
  RunSecretSchema,
  WorkflowSchema,
  WorkflowVersionSchema,
} from '../db/entities/index.ts';
import { CLAIM_ON_CONFLICT, IDEMPOTENCY_RECORD_HOURS } from './idempotency-records.ts';
import { fairPass } from './fair-pass.ts';
import { COUNT_CALLS } from './rate-windows.ts';
import { viewTokenOf } from './workflows.ts';

/** One POST /runs to accept: the run as it is to be written, and what its acceptance checks. */
export interface RunAcceptance {
  runId: string;
  accountId: string;
  apiKeyId: string;
  workflowId: string;
  versionId: string;
  /** The displayed price, also the spend-cap reservation (`runs.cap_usd`). */
  priceUsd: string;
  userAccess: string;
  creatorPriceUsd: string;
  stepUsd: string;
  computeLimitUsd: string;
  credentialMode: string;
  /** The public inputs, as JSON (password inputs are null here, sealed in `secrets`). */
  inputsJson: string;
  engine: string;
  idempotencyKey: string | null;
  /** The request's fingerprint (compared on a replay of its idempotency key). */
  fingerprint: string;
  /** The idempotency record's id (time-ordered: src/sql/idempotency-records.ts). */
  recordId: string;
  /** The key's spend cap and the start of its window, or nulls: no cap. */
  capUsd: string | null;
  capSince: string | null;
  /** The request's trace context (JSON, docs/tracing.md) or null. */
  traceContext: string | null;
  /** The view token of the workflow read the request was checked against, or null: fenced on nothing. */
  viewToken: string | null;
  /** The key's limit per minute when the request is counted here, else null (it was counted before). */
  rateLimit: number | null;
  /** The caller's metadata, as JSON (src/domain/run-metadata.ts). */
  metadataJson: string;
  /** The Cancel-After duration in seconds (the deadline is counted from the run's start: creation or `startAt`), or null. */
  cancelAfterSeconds: number | null;
  /** A delayed start (ISO instant): a later one writes the run `scheduled` for it; null or past: queued now. */
  startAt?: string | null;
  /** A debounced run's key and the latest start its burst may reach (ISO), or absent: not debounced. */
  debounce?: { key: string; until: string } | null;
  /** The priority class (0 high, 1 normal, 2 low; absent: normal), the concurrency key and its bound (absent: none): docs/design/flow-control.md. */
  priority?: number;
  concurrencyKey?: string | null;
  concurrencyLimit?: number | null;
  /** The run this one replays (POST /runs/{id}/replay), written with it; null or absent: none. */
  replayOf?: string | null;
  /** Sealed password inputs. */
  secrets: readonly { id: string; name: string; ciphertext: string }[];
}

/**
 * POST /runs for a batch of requests as ONE statement over one JSON array of named calls (a single
 * request is a batch of one: src/runs/accept-run.ts), written as the calls one after another
 * would be (docs/design/rules.md#idempotency, #rate-limit, money.md#spend-caps). It never raises for
 * one call's reason: each call gets a row saying what happened to it (`ord`, its place from 1).
 *
 * - `key_count`, `window_count`, `call_rate`: the calls counted here (with a limit) are counted in their
 *   key's window, one upsert per key in key order (the row stays locked until the commit). The k-th such
 *   call of a key is allowed iff the window's total before the batch plus k is within the limit, and only
 *   allowed calls are counted (`last_counted`: how many were); a refused call writes nothing.
 * - `checked_call`: each call, allowed, and `current`: the workflow as its caller sees it still has the
 *   view token of the read the request was checked against (src/sql/workflows.ts).
 * - `over_cap`: the calls whose price does not fit their key's spend cap (`wr_spend_cap_refusals`,
 *   src/db/entities/routines.ts: it locks the keys' rows and sums their windows after the lock); a call
 *   that replays a live idempotency record reserves nothing. It is read before any run is written.
 * - `claim`: the idempotency records of the calls that may write, `insert … on conflict` deciding replay
 *   vs new (CLAIM_ON_CONFLICT). Calls sharing an (account, key) never share an execution (the service's
 *   Batch keeps them apart): one insert cannot claim one record twice.
 * - `new_call`, `inserted_run`, `labelled`, `sealed_input`, `queued_event`: for each new run, the run (queued:
 *   the engine admits in rounds of its own; or `scheduled` for a later `start_at`, outside the line until
 *   then: src/runs/scheduled-runs.ts), its metadata pairs (`run_labels`, for GET /runs
 *   filters), its sealed password inputs and its `run.queued` event (its pass in the queue's order:
 *   src/sql/fair-pass.ts).
 *
 * Each row: `run_id`, `fingerprint` (the claimed record's: this run's, or the one to replay),
 * `inserted`, `stale` (nothing written: the workflow changed), `over_cap` (nothing written: the cap),
 * and for a call counted here `allowed` (false: nothing written), `counted` (the window's total after
 * it), `oldest_ms` and `now_ms` (src/runs/rate-limiter.ts `decide`).
 */
export const ACCEPT_RUNS = statement(
  'accept_runs',
  `with call as materialized (
  select * from jsonb_to_recordset($1::jsonb)
         as call(ord bigint, run_id uuid, account_id uuid, api_key_id uuid, workflow_id uuid, version_id uuid, price numeric, user_access text,
                 creator_price numeric, step_usd numeric, compute_limit numeric, credential_mode text, inputs text, engine text,
                 idempotency_key text, fingerprint text, record_id uuid, cap_usd numeric, cap_since timestamptz, trace_context text,
                 view_token text, rate_limit int, metadata text, cancel_after int, replay_of uuid, start_at timestamptz,
                 debounce_key text, debounce_until timestamptz, priority smallint, concurrency_key text, concurrency_limit int)),
${COUNT_CALLS},
checked_call as materialized (
  select c.*, coalesce(r.allowed, true) as allowed,
         (c.view_token is null or ${viewTokenOf('c.account_id', 'c.workflow_id')} is not distinct from c.view_token) as current
    from call c left join call_rate r on r.ord = c.ord),
over_cap as materialized (
  select case when count(*) = 0 then '{}'::bigint[]
              else wr_spend_cap_refusals(array_agg(ord order by ord), array_agg(api_key_id order by ord), array_agg(cap_since order by ord),
                                         array_agg(price order by ord), array_agg(cap_usd order by ord), array_agg(account_id order by ord),
                                         array_agg(idempotency_key order by ord)) end as ords
    from checked_call where allowed and current and cap_usd is not null),
claim as (
  insert into idempotency_records (id, account_id, key, fingerprint, run_id, created_at, expires_at)
  select c.record_id, c.account_id, c.idempotency_key, c.fingerprint, c.run_id, now(), now() + interval '${IDEMPOTENCY_RECORD_HOURS} hours'
    from checked_call c cross join over_cap
   where c.idempotency_key is not null and c.allowed and c.current and not (c.ord = any(over_cap.ords))
   order by c.account_id, c.idempotency_key
  ${CLAIM_ON_CONFLICT}
  returning account_id, key, run_id, fingerprint),
new_call as (
  select c.*, case when c.start_at > clock_timestamp() then c.start_at end as scheduled_for from checked_call c cross join over_cap
   where c.allowed and c.current and not (c.ord = any(over_cap.ords))
     and (c.idempotency_key is null or exists (select 1 from claim where claim.run_id = c.run_id))),
inserted_run as (
  insert into runs (id, account_id, api_key_id, workflow_id, version_id, status, phase, billing_status,
                    cap_usd, user_access, displayed_price_usd, creator_price_usd, step_usd, compute_limit_usd,
                    credential_mode, inputs, progress, outputs, engine, last_sequence, created_at, queued_at, updated_at, trace_context, metadata,
                    deadline, replay_of, scheduled_for, debounce_key, debounce_until, priority, concurrency_key, concurrency_limit, fair_pass)
  select n.run_id, n.account_id, n.api_key_id, n.workflow_id, n.version_id, 'pending',
         case when n.scheduled_for is null then 'queued' else 'scheduled' end, 'pending',
         n.price, n.user_access, n.price, n.creator_price, n.step_usd, n.compute_limit, n.credential_mode, n.inputs::jsonb,
         '{"results":{},"timers":{}}'::jsonb, '[]'::jsonb, n.engine, 1, clock_timestamp(), clock_timestamp(), clock_timestamp(), n.trace_context::jsonb,
         n.metadata::jsonb, coalesce(n.scheduled_for, clock_timestamp()) + make_interval(secs => n.cancel_after), n.replay_of, n.scheduled_for,
         n.debounce_key, n.debounce_until, n.priority, n.concurrency_key, n.concurrency_limit, ${fairPass('n')}
    from new_call n
   order by n.ord
  returning id, created_at, account_id, metadata),
labelled as (
  insert into run_labels (account_id, key, value, created_at, run_id)
  select r.account_id, m.key, m.value, r.created_at, r.id from inserted_run r cross join jsonb_each_text(r.metadata) m),
sealed_input as (
  insert into run_secrets (id, run_id, kind, name, ciphertext, created_at)
  select s.id, r.id, 'password_input', s.name, s.ciphertext, now()
    from jsonb_to_recordset($2::jsonb) as s(ord bigint, id uuid, name text, ciphertext text)
    join call c on c.ord = s.ord
    join inserted_run r on r.id = c.run_id),
queued_event as (
  insert into run_event_batches (run_id, last_sequence, types, node_ids, data, ts)
  select r.id, 1, array['run.queued'], array[null]::text[], array['{"status":"pending"}'::jsonb], r.created_at from inserted_run r)
select c.ord, cl.run_id, cl.fingerprint, exists (select 1 from inserted_run r where r.id = c.run_id) as inserted, not c.current as stale,
       c.ord = any(over_cap.ords) as over_cap, r.allowed, r.counted, r.oldest_ms,
       case when r.ord is not null then (extract(epoch from now()) * 1000)::float8 end as now_ms
  from checked_call c
 cross join over_cap
  left join claim cl on cl.account_id = c.account_id and cl.key = c.idempotency_key
  left join call_rate r on r.ord = c.ord
 order by c.ord`,
  [
    ApiKeyRateWindowSchema,
    WorkflowSchema,
    AccountSchema,
    PurchaseSchema,
    WorkflowVersionSchema,
    IdempotencyRecordSchema,
    RunSchema,
    RunSecretSchema,
    RunEventBatchSchema,
    RunLabelSchema,
  ],
);

/**
 * ACCEPT_RUNS's two parameters for `calls`: the calls as one JSON array of named fields (`ord`: the
 * call's place from 1), and their sealed password inputs flattened with their call's ord.
 */
export function acceptRunsValues(calls: readonly RunAcceptance[]): unknown[] {
  const rows = calls.map((c, i) => ({
    ord: i + 1,
    run_id: c.runId,
    account_id: c.accountId,
    api_key_id: c.apiKeyId,
    workflow_id: c.workflowId,
    version_id: c.versionId,
    price: c.priceUsd,
    user_access: c.userAccess,
    creator_price: c.creatorPriceUsd,
    step_usd: c.stepUsd,
    compute_limit: c.computeLimitUsd,
    credential_mode: c.credentialMode,
    inputs: c.inputsJson,
    engine: c.engine,
    idempotency_key: c.idempotencyKey,
    fingerprint: c.fingerprint,
    record_id: c.recordId,
    cap_usd: c.capUsd,
    cap_since: c.capSince,
    trace_context: c.traceContext,
    view_token: c.viewToken,
    rate_limit: c.rateLimit,
    metadata: c.metadataJson,
    cancel_after: c.cancelAfterSeconds,
    replay_of: c.replayOf ?? null,
    start_at: c.startAt ?? null,
    debounce_key: c.debounce?.key ?? null,
    debounce_until: c.debounce?.until ?? null,
    priority: c.priority ?? 1,
    concurrency_key: c.concurrencyKey ?? null,
    concurrency_limit: c.concurrencyLimit ?? null,
  }));
  const secrets = calls.flatMap((c, i) => c.secrets.map((secret) => ({ ord: i + 1, ...secret })));
  return [JSON.stringify(rows), JSON.stringify(secrets)];
}

/** ACCEPT_RUNS's row for one call. */
export type AcceptedRow = {
  run_id: string | null;
  fingerprint: string | null;
  inserted: boolean;
  stale: boolean;
  over_cap: boolean;
  /** The rate window's columns (src/sql/rate-windows.ts HitRow), null when the call was not counted here. */
  allowed: boolean | null;
  counted: number | null;
  oldest_ms: number | null;
  now_ms: number | null;
};
