import { statement } from '../db/statement.ts';
import {
  AccountSchema,
  ApiKeyRateWindowSchema,
  IdempotencyRecordSchema,
  PurchaseSchema,
  RunEventBatchSchema,
  RunSchema,
  WorkflowSchema,
  WorkflowVersionSchema,
} from '../db/entities/index.ts';
import { inFlightRun, queuedRun } from './run-predicates.ts';
import { CLAIM_ON_CONFLICT, IDEMPOTENCY_RECORD_HOURS } from './idempotency-records.ts';
import { GATE_CTE } from './queue-line.ts';
import { SHIFTED_WINDOW } from './rate-windows.ts';
import { STATE_COLUMNS } from './runs.ts';
import { viewTokenOf } from './workflows.ts';

/**
 * ACCEPT_RUN (src/sql/accept-run.ts) for a group of acceptances as ONE set-based statement, for the
 * variants without a spend cap and without sealed inputs (`accept_run_plain`, `accept_run_with_hit`):
 * what N executions of it in one transaction write, in one execution. Each execution of the single
 * statement starts and ends an executor for a plan of some thirty nodes, counts its key's window row,
 * reads the workflow's view token and counts the runs in flight; here that is done once per group, per
 * key and per caller and workflow. See docs/round-trips.md#a-group-of-acceptances-as-one-statement.
 *
 * Parameters: arrays with one element per acceptance, in the group's order, standing for the single
 * statement's $1–$16 ($12, the inputs, as JSON texts), then $17 its $22 (trace context, JSON text or
 * null), $18 its $23 (view token) and $19 its $24 (the key's limit, or null: not counted here). The
 * group's acceptances share one engine ($13) and name each idempotency key of an account once, and the
 * acceptances of one key carry one limit (src/services/runs/acceptances-together.ts sends no other group).
 *
 * It writes exactly what the single statements would, one after another, or raises:
 * - `hit`: a key's acceptances are counted together (`n`). One by one each would be allowed while the
 *   window's total is below the limit; when the window cannot take them all, it raises (`wr_refuse`,
 *   SQLSTATE WR001) and the group runs again statement by statement, where the ones over the limit get
 *   their 429. Otherwise the k-th of a key sees `counted` = the total before them + k; every one of them
 *   sees the same oldest bucket and clock.
 * - `claim`: the idempotency records, as the single statement claims each one.
 * - `adm`: one by one, an acceptance is admitted when the queue holds none of its engine's runs and
 *   there is room under RUN_CAPACITY and its account's max_concurrent_runs, counting the runs admitted
 *   by the acceptances before it; the first it does not admit is queued, and then every later one sees
 *   a queued run. So the admitted ones are the longest prefix of the new runs (`fresh`, in order) whose
 *   counts, plus the new runs before each (`j`, per account `aj`), stay under the limits.
 *
 * Returns one row per acceptance: `ord` (its place in the arrays, from 1) and the single statement's columns.
 */
export const ACCEPT_RUN_MANY = statement(
  'accept_run_many',
  `with ${GATE_CTE},
i as materialized (
  select x.*, row_number() over (partition by x.api_key_id order by x.ord)::int as key_rank
    from unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::uuid[], $5::uuid[], $6::numeric[], $7::text[], $8::numeric[],
                $9::numeric[], $10::numeric[], $11::text[], $12::text[], $13::text[], $14::text[], $15::text[], $16::uuid[],
                $17::text[], $18::text[], $19::int[])
         with ordinality as x(run_id, account_id, api_key_id, workflow_id, version_id, price, user_access, creator_price,
                              step_usd, compute_limit, credential_mode, inputs, engine, idem_key, fingerprint, record_id,
                              trace, token, lim, ord)),
k as (select api_key_id, count(*)::int as n, max(lim) as lim from i where lim is not null group by api_key_id),
hit as (
  insert into api_key_rate_windows as w (api_key_id, second, counts, total, total_second, allowed)
  select k.api_key_id, s.second, array_fill(0, array[59]) || k.n,
         case when k.n <= greatest(k.lim, 1) then k.n else wr_refuse('the rate window of an API key cannot take all of its group') end,
         s.second, true
    from k, (select floor(extract(epoch from now()))::bigint as second) s
   order by k.api_key_id
  on conflict (api_key_id) do update set (second, counts, total, total_second, allowed) = (
    select q.second, q.kept[1:59] || (q.kept[60] + q.n), q.total + q.n, q.second, true
      from (select s.second, s.kept, s.total,
                   case when s.total + excluded.total <= (select k.lim from k where k.api_key_id = excluded.api_key_id) then excluded.total
                        else wr_refuse('the rate window of an API key cannot take all of its group') end as n
              from ${SHIFTED_WINDOW} s
            offset 0) q)
  returning api_key_id, total, ((second - 60 + array_position(counts::boolean[], true)) * 1000)::float8 as oldest_ms),
ok as materialized (
  select i.*, (i.token is null or ${viewTokenOf('i.account_id', 'i.workflow_id')} is not distinct from i.token) as current
    from i),
claim as (
  insert into idempotency_records (id, account_id, key, fingerprint, run_id, created_at, expires_at)
  select ok.record_id, ok.account_id, ok.idem_key, ok.fingerprint, ok.run_id, now(), now() + interval '${IDEMPOTENCY_RECORD_HOURS} hours'
    from ok where ok.idem_key is not null and ok.current
   order by ok.ord
  ${CLAIM_ON_CONFLICT}
  returning account_id, key, run_id, fingerprint),
fresh as materialized (
  select ok.*, row_number() over (order by ok.ord)::int as j, row_number() over (partition by ok.account_id order by ok.ord)::int as aj
    from ok
   where ok.current and (ok.idem_key is null or exists (select 1 from claim c where c.run_id = ok.run_id))),
base as materialized (
  select d.admit, case when d.admit then nullif(current_setting('wr.admit_lease_owner', true), '') end as lease_owner,
         case when d.admit then not exists (select 1 from runs q where ${queuedRun('q')} and q.engine = d.engine) end as clear,
         case when d.admit then (select count(*) from runs f where ${inFlightRun('f')}) end as flying,
         case when d.admit then current_setting('wr.admit_capacity', true)::int end as capacity
    from (select coalesce(current_setting('wr.admission', true) = 'true' and current_setting('wr.admit_engine', true) = e.engine, false) as admit, e.engine
            from (select engine from i order by ord limit 1) e offset 0) d),
acct as materialized (
  select a.id, a.max_concurrent_runs as max,
         case when a.max_concurrent_runs is not null then (select count(*) from runs f where f.account_id = a.id and ${inFlightRun('f')}) end as flying
    from accounts a where (select admit from base) and a.id in (select account_id from fresh)),
adm as materialized (
  select f.ord,
         coalesce(bool_and(coalesce(b.admit and b.clear and b.flying + f.j - 1 < b.capacity
                                    and a.id is not null and (a.max is null or a.flying + f.aj - 1 < a.max), false))
                    over (order by f.ord rows between unbounded preceding and current row), false) as now
    from fresh f cross join base b left join acct a on a.id = f.account_id),
r as (
  insert into runs (id, account_id, api_key_id, workflow_id, version_id, status, phase, billing_status,
                    cap_usd, user_access, displayed_price_usd, creator_price_usd, step_usd, compute_limit_usd,
                    credential_mode, inputs, progress, outputs, engine, last_sequence, created_at, queued_at, updated_at, trace_context,
                    lease_owner, lease_until)
  select f.run_id, f.account_id, f.api_key_id, f.workflow_id, f.version_id, 'pending', case when adm.now then 'starting' else 'queued' end, 'pending',
         f.price, f.user_access, f.price, f.creator_price, f.step_usd, f.compute_limit, f.credential_mode, f.inputs::jsonb,
         '{"results":{},"timers":{}}'::jsonb, '[]'::jsonb, f.engine, 1, clock_timestamp(), clock_timestamp(), clock_timestamp(), f.trace::jsonb,
         case when adm.now then b.lease_owner end,
         case when adm.now and b.lease_owner is not null
           then clock_timestamp() + make_interval(secs => current_setting('wr.admit_lease_secs', true)::float8) end
    from fresh f join adm on adm.ord = f.ord cross join base b
   order by f.ord
  returning id, created_at, ${STATE_COLUMNS}),
e as (
  insert into run_event_batches (run_id, last_sequence, types, node_ids, data, ts)
  select r.id, 1, array['run.queued'], array[null]::text[], array['{"status":"pending"}'::jsonb], r.created_at from r cross join gate)
select ok.ord, c.run_id, c.fingerprint, exists (select 1 from r where r.id = ok.run_id) as inserted, not ok.current as stale,
       case when ok.lim is not null then true end as allowed,
       case when ok.lim is not null then h.total - k.n + ok.key_rank end as counted,
       case when ok.lim is not null then h.oldest_ms end as oldest_ms,
       case when ok.lim is not null then (extract(epoch from now()) * 1000)::float8 end as now_ms,
       a.*
  from ok
  left join claim c on c.account_id = ok.account_id and c.key = ok.idem_key
  left join k on k.api_key_id = ok.api_key_id
  left join hit h on h.api_key_id = ok.api_key_id
  left join (select id as admitted_id, ${STATE_COLUMNS} from r where phase = 'starting') a on a.admitted_id = ok.run_id
 order by ok.ord`,
  [ApiKeyRateWindowSchema, WorkflowSchema, AccountSchema, PurchaseSchema, WorkflowVersionSchema, IdempotencyRecordSchema, RunSchema, RunEventBatchSchema],
);
